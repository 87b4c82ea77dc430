"""Read source files into documents with llama-index readers.

Plain text and Markdown are read whole; PDF pages are joined; HTML is reduced to its visible text;
JSON / JSON Lines give one document per record with a text field. Binary or undecodable files are
reported as unreadable (the caller skips and counts them).
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from llama_index.core import Document, SimpleDirectoryReader
from llama_index.core.readers.base import BaseReader

log = logging.getLogger(__name__)

TEXT_FIELDS = ("text", "content", "body", "context", "passage")
SUPPORTED = {".txt", ".md", ".markdown", ".rst", ".pdf", ".html", ".htm", ".json", ".jsonl"}


class UnreadableFile(Exception):
    """The file cannot be turned into text (binary, bad encoding, broken PDF or JSON)."""


@dataclass(frozen=True)
class SourceDocument:
    path: str  # absolute path of the file
    locator: str  # "" for the whole file, "L<n>" for line n of a JSON Lines file, "R<i>" for a JSON list item
    text: str


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise UnreadableFile("binary content")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


class PlainTextReader(BaseReader):
    def load_data(self, file, extra_info=None, fs=None):
        return [Document(text=_read_text(Path(file)), metadata={"locator": ""})]


class HtmlTextReader(BaseReader):
    """Visible text of an HTML page (scripts and styles dropped)."""

    def load_data(self, file, extra_info=None, fs=None):
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(_read_text(Path(file)), "html.parser")
        for tag in soup(["script", "style", "noscript"]):
            tag.decompose()
        lines = (line.strip() for line in soup.get_text("\n").splitlines())
        return [Document(text="\n".join(line for line in lines if line), metadata={"locator": ""})]


class JsonRecordsReader(BaseReader):
    """One document per record that has a text field (text, content, body, context or passage)."""

    def load_data(self, file, extra_info=None, fs=None):
        path = Path(file)
        raw = _read_text(path)
        if path.suffix == ".jsonl":
            records = [(f"L{n}", line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
            parsed = [(loc, self._parse(line, path, loc)) for loc, line in records]
        else:
            data = self._parse(raw, path, "")
            items = data if isinstance(data, list) else [data]
            parsed = [(f"R{i}" if isinstance(data, list) else "", item) for i, item in enumerate(items)]
        docs = []
        for locator, record in parsed:
            text = next((record[f] for f in TEXT_FIELDS if isinstance(record, dict)
                         and isinstance(record.get(f), str) and record[f].strip()), None)
            if text is None:
                log.warning("%s %s: no text field (%s); skipped", path, locator, ", ".join(TEXT_FIELDS))
                continue
            docs.append(Document(text=text, metadata={"locator": locator}))
        return docs

    @staticmethod
    def _parse(text: str, path: Path, locator: str):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UnreadableFile(f"invalid JSON {locator} ({exc.msg} at line {exc.lineno})") from exc


def _extractors() -> dict:
    text, html, records = PlainTextReader(), HtmlTextReader(), JsonRecordsReader()
    return {".txt": text, ".md": text, ".markdown": text, ".rst": text, ".html": html,
            ".htm": html, ".json": records, ".jsonl": records}


def discover(paths: list[Path]) -> list[Path]:
    """Files under `paths` (recursively), supported ones and others, hidden ones excluded; sorted."""
    found: set[Path] = set()
    for root in paths:
        root = Path(root).expanduser().resolve()
        if root.is_file():
            found.add(root)
        elif root.is_dir():
            found.update(p for p in root.rglob("*") if p.is_file()
                         and not any(part.startswith(".") for part in p.relative_to(root).parts))
    return sorted(found)


def read_file(path: Path) -> list[SourceDocument]:
    """Documents of one file; raises UnreadableFile when it cannot be read as text."""
    if path.suffix.lower() not in SUPPORTED:
        raise UnreadableFile(f"unsupported file type {path.suffix or '(none)'}")
    reader = SimpleDirectoryReader(input_files=[str(path)], file_extractor=_extractors(),
                                   raise_on_error=True)
    try:
        docs = reader.load_data(show_progress=False)
    except UnreadableFile:
        raise
    except Exception as exc:  # readers (pypdf, ...) raise their own types on broken files
        cause = exc.__cause__ if isinstance(exc.__cause__, UnreadableFile) else exc
        raise UnreadableFile(str(cause).splitlines()[0] if str(cause) else type(cause).__name__) from exc
    if path.suffix.lower() == ".pdf":  # PDFReader gives one document per page
        text = "\n\n".join(d.text for d in docs if d.text.strip())
        return [SourceDocument(str(path), "", text)] if text.strip() else []
    return [SourceDocument(str(path), d.metadata.get("locator", ""), d.text)
            for d in docs if d.text.strip()]
