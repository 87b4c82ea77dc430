"""What `/v1/ingest` may read and write: paths under the configured roots only (resolved, so `..`
and symbolic links cannot lead out), and uploaded text saved under the store's `uploads/` folder
with a plain file name."""

import re
from pathlib import Path

from cag.atomic import atomic_write_text
from cag.ingest.reading import SUPPORTED, discover
from cag.server.errors import ForbiddenPathError, HttpError, NotFoundError

_UPLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
UPLOADS = "uploads"


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def resolve_ingest_path(raw: str, roots: list[Path]) -> Path:
    """`raw` (absolute, or relative to the first root) resolved, if it lies under a root: a folder
    is checked file by file (a link inside it must not lead out either)."""
    if not roots:
        raise ForbiddenPathError("This server reads no paths: start it with --ingest-root DIR, or send "
                                 "the text as documents [{\"name\", \"text\"}].")
    given = Path(raw)
    if ".." in given.parts:
        raise ForbiddenPathError(f"Path {raw!r} contains '..': give a path under the ingest roots.")
    resolved_roots = [Path(r).resolve() for r in roots]
    path = (given if given.is_absolute() else resolved_roots[0] / given).resolve()
    if not _inside(path, resolved_roots):
        raise ForbiddenPathError(f"Path {raw!r} is outside the ingest roots "
                                 f"({', '.join(map(str, resolved_roots))}).")
    if not path.exists():
        raise NotFoundError(f"No such file or folder under the ingest roots: {raw!r}.")
    if path.is_dir():
        for found in discover([path]):
            if not _inside(found.resolve(), resolved_roots):
                raise ForbiddenPathError(f"{found} links outside the ingest roots; remove the link or "
                                         "ingest the files one by one.")
    return path


def save_upload(store_dir: Path, name: str, text: str) -> Path:
    """Write uploaded text to STORE/uploads/NAME (a plain name with a supported text suffix)."""
    if not _UPLOAD_NAME.fullmatch(name or ""):
        raise HttpError(f"Document name {name!r} is not a plain file name: use letters, digits, '.', '_' "
                        "or '-', starting with a letter or digit (e.g. notes.md).")
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED or suffix == ".pdf":
        raise HttpError(f"Document {name!r} needs a text suffix: .txt, .md, .html, .json or .jsonl.")
    path = Path(store_dir) / UPLOADS / name
    atomic_write_text(path, text)
    return path
