"""Conversations kept as chunk caches: one cag store per session.

    STORE/sessions/<id>/          a cag store whose encoder is the session's memory model
      session.json                id, memory model, creation time
      turns.jsonl                 every record (a message, a reply, an agent's note), who wrote it
      store.json, catalog.sqlite, caches/ ...   turns.jsonl ingested by cag's ingest pipeline

A record is appended by rewriting turns.jsonl atomically (a kill leaves the old file or the new
one), then the file is ingested: content-hashed chunk caches, so only the new records are
prefilled. A kill between the two leaves the catalog behind the file; the next turn ingests first
(`lagging` / `sync`). Session ids are generated (uuid4 hex) and checked against that shape before
any path is built from them, so a request cannot name a folder outside STORE/sessions/.
"""

import hashlib
import json
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from cag.atomic import atomic_write_text
from cag.ingest.pipeline import IngestOptions, ingest
from cag.server.errors import HttpError, NotFoundError
from cag.store.store import Store, StoreConfig

SESSIONS = "sessions"
TURNS = "turns.jsonl"
_ID = re.compile(r"[0-9a-f]{32}")
ROLES = ("user", "assistant", "note")


@dataclass(frozen=True)
class Record:
    n: int  # 1-based: its line in turns.jsonl (the catalog's locator "L<n>")
    turn: int
    role: str  # user, assistant (a reply the server generated) or note (written by an agent elsewhere)
    author: str  # "user", or the model / agent that wrote it
    content: str

    @property
    def text(self) -> str:
        """What the memory model prefills: the content, with who wrote it."""
        return f"{self.author}: {self.content}"

    def to_json(self) -> dict:
        return {**asdict(self), "text": self.text}


class Sessions:
    """The sessions of one main store."""

    def __init__(self, store_dir: Path, config: StoreConfig):
        self.root = Path(store_dir) / SESSIONS
        self.config = config  # the main store's: embedder, chunking and cache dtype are shared
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def folder(self, sid: str) -> Path:
        if not isinstance(sid, str) or not _ID.fullmatch(sid):
            raise NotFoundError(f"No session {sid!r}: session ids are 32 hex digits, as POST /v1/sessions returns.")
        folder = self.root / sid
        if not (folder / "session.json").is_file():
            raise NotFoundError(f"No session {sid}: create one with POST /v1/sessions.")
        return folder

    def lock(self, sid: str) -> threading.Lock:
        """One turn at a time per session."""
        with self._locks_guard:
            return self._locks.setdefault(sid, threading.Lock())

    def create(self, memory_model: str) -> dict:
        sid = uuid.uuid4().hex
        meta = {"id": sid, "memory_model": memory_model, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        atomic_write_text(self.root / sid / "session.json", json.dumps(meta, indent=2))
        return meta

    def meta(self, sid: str) -> dict:
        return json.loads((self.folder(sid) / "session.json").read_text())

    def records(self, sid: str) -> list[Record]:
        path = self.folder(sid) / TURNS
        if not path.is_file():
            return []
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [Record(r["n"], r["turn"], r["role"], r["author"], r["content"]) for r in rows]

    def append(self, sid: str, new: list[tuple[str, str, str]], turn: int | None = None) -> list[Record]:
        """Append (role, author, content) records (one turn); the whole file is rewritten atomically."""
        old = self.records(sid)
        turn = turn if turn is not None else (old[-1].turn + 1 if old else 1)
        added = [Record(len(old) + i + 1, turn, role, author, content) for i, (role, author, content) in enumerate(new)]
        lines = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in old + added)
        atomic_write_text(self.folder(sid) / TURNS, lines)
        return added

    def lagging(self, sid: str) -> bool:
        """Whether turns.jsonl holds records the session store has not ingested (a killed turn)."""
        folder = self.folder(sid)
        path = folder / TURNS
        if not path.is_file():
            return False
        if not (folder / "store.json").is_file():
            return True
        store = Store.open(folder)
        try:
            return store.catalog.file_sha256(str(path.resolve())) != hashlib.sha256(path.read_bytes()).hexdigest()
        finally:
            store.close()

    def sync(self, sid: str, memory_lm, embedder):
        """Ingest turns.jsonl into the session store with the (loaded) memory model."""
        folder = self.folder(sid)
        options = IngestOptions(encoder=memory_lm.name, embedder=self.config.embedder,
                                chunk_tokens=self.config.chunk_tokens, cache_dtype=self.config.cache_dtype)
        return ingest([folder / TURNS], folder, options, encoder_lm=memory_lm, embedder=embedder)

    def open_store(self, sid: str) -> Store | None:
        folder = self.folder(sid)
        return Store.open(folder) if (folder / "store.json").is_file() else None


def history_rows(store: Store | None) -> list:
    """Every chunk of the session's history, in the order it was written (records by line number,
    chunks by index): the history is read whole, not retrieved."""
    if store is None:
        return []
    rows = store.catalog.all_chunks()
    return sorted(rows, key=lambda r: (_line(r.doc_locator), r.idx))


def _line(locator: str) -> int:
    if not locator.startswith("L") or not locator[1:].isdigit():
        raise HttpError(f"Session store holds a document {locator!r} that is not a turns.jsonl record.")
    return int(locator[1:])


def check_record(role: str, author: str, content: str) -> None:
    if role not in ROLES:
        raise HttpError(f"Unknown role {role!r}; choose one of {', '.join(ROLES)}.")
    if not author or len(author) > 128 or any(c in author for c in "\r\n:"):
        raise HttpError(f"Author {author!r} must be 1-128 characters without ':' or line breaks.")
    if not content or not content.strip():
        raise HttpError("A record's content is empty.")
