"""The store's catalog: documents and chunks in SQLite, the single source of truth.

Every change to one file's documents is one transaction, so a kill at any moment leaves the catalog
either before or after that file. The generation counter increases with every change; the FAISS
index records the generation it was built from, so a stale index is detected and rebuilt.
"""

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cag.faults import fault_point

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,          -- absolute source file path
    locator TEXT NOT NULL,       -- '' for a whole file, 'L<n>' for a JSON Lines record, ...
    file_sha256 TEXT NOT NULL,
    n_chars INTEGER NOT NULL,
    UNIQUE (path, locator)
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,      -- the FAISS id
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,        -- chunk index inside its document
    text TEXT NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    text_sha256 TEXT NOT NULL,
    n_tokens INTEGER NOT NULL,   -- encoder tokens
    embedding BLOB NOT NULL,     -- float32 [dim]
    UNIQUE (doc_id, idx)
);
CREATE INDEX IF NOT EXISTS chunks_text ON chunks(text_sha256);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def doc_label(path: str, locator: str) -> str:
    """How a document is named to users: its file, plus `#locator` for a record inside it."""
    return path + (f"#{locator}" if locator else "")


@dataclass(frozen=True)
class ChunkRow:
    id: int
    doc_path: str
    doc_locator: str
    idx: int
    text: str
    char_start: int
    char_end: int
    text_sha256: str
    n_tokens: int

    @property
    def doc(self) -> str:
        return doc_label(self.doc_path, self.doc_locator)


@dataclass(frozen=True)
class NewChunk:
    idx: int
    text: str
    char_start: int
    char_end: int
    text_sha256: str
    n_tokens: int
    embedding: np.ndarray  # (dim,) float32


class Catalog:
    def __init__(self, path: Path):
        self.conn = sqlite3.connect(str(path), isolation_level=None)  # explicit transactions
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.executescript(_SCHEMA)

    def close(self) -> None:
        self.conn.close()

    @property
    def generation(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def _bump(self) -> None:
        self.conn.execute("INSERT INTO meta VALUES ('generation', ?) ON CONFLICT(key) DO UPDATE "
                          "SET value = excluded.value", (str(self.generation + 1),))

    def file_sha256(self, path: str) -> str | None:
        row = self.conn.execute("SELECT file_sha256 FROM documents WHERE path = ? LIMIT 1",
                                (path,)).fetchone()
        return row[0] if row else None

    def paths(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT path FROM documents ORDER BY path")]

    def replace_file(self, path: str, file_sha256: str, documents: list) -> None:
        """Atomically replace everything stored for `path` by `documents`: [(locator, n_chars, [NewChunk])]."""
        with self._transaction():
            self.conn.execute("DELETE FROM documents WHERE path = ?", (path,))
            for locator, n_chars, chunks in documents:
                doc_id = self.conn.execute(
                    "INSERT INTO documents (path, locator, file_sha256, n_chars) VALUES (?, ?, ?, ?)",
                    (path, locator, file_sha256, n_chars)).lastrowid
                self.conn.executemany(
                    "INSERT INTO chunks (doc_id, idx, text, char_start, char_end, text_sha256, "
                    "n_tokens, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(doc_id, c.idx, c.text, c.char_start, c.char_end, c.text_sha256, c.n_tokens,
                      np.asarray(c.embedding, dtype=np.float32).tobytes()) for c in chunks])
                fault_point("in_transaction")
            self._bump()

    def rename_path(self, old: str, new: str) -> None:
        """Point `old`'s documents at `new` (a file that moved with its store); `new` must be unused."""
        with self._transaction():
            if self.conn.execute("SELECT 1 FROM documents WHERE path = ? LIMIT 1", (new,)).fetchone():
                raise ValueError(f"{new} is already in the catalog")
            self.conn.execute("UPDATE documents SET path = ? WHERE path = ?", (new, old))
            self._bump()

    def remove_paths(self, paths: list[str]) -> int:
        if not paths:
            return 0
        with self._transaction():
            removed = sum(self.conn.execute("DELETE FROM documents WHERE path = ?", (p,)).rowcount
                          for p in paths)
            self._bump()
        return removed

    def _transaction(self):
        conn = self.conn

        class _Tx:
            def __enter__(self):
                conn.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type, exc, tb):
                conn.execute("COMMIT" if exc_type is None else "ROLLBACK")

        return _Tx()

    _CHUNK_COLUMNS = ("SELECT c.id, d.path, d.locator, c.idx, c.text, c.char_start, c.char_end, "
                      "c.text_sha256, c.n_tokens FROM chunks c JOIN documents d ON d.id = c.doc_id")

    def chunks_by_id(self, ids: list[int]) -> dict[int, ChunkRow]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(f"{self._CHUNK_COLUMNS} WHERE c.id IN ({marks})", list(ids))
        return {r[0]: ChunkRow(*r) for r in rows}

    def chunks_of(self, path: str, locator: str) -> list[ChunkRow]:
        """One document's chunks in document order."""
        return [ChunkRow(*r) for r in self.conn.execute(
            f"{self._CHUNK_COLUMNS} WHERE d.path = ? AND d.locator = ? ORDER BY c.idx", (path, locator))]

    def embeddings_of(self, ids: list[int], dim: int) -> np.ndarray:
        """Embeddings (len(ids), dim) float32 of the given chunk ids, in that order."""
        marks = ",".join("?" * len(ids))
        found = dict(self.conn.execute(f"SELECT id, embedding FROM chunks WHERE id IN ({marks})", list(ids)))
        return np.frombuffer(b"".join(found[i] for i in ids), dtype=np.float32).reshape(-1, dim)

    def all_chunks(self) -> list[ChunkRow]:
        return [ChunkRow(*r) for r in self.conn.execute(f"{self._CHUNK_COLUMNS} ORDER BY d.path, d.locator, c.idx")]

    def embeddings(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """All chunk ids (n,) int64 and embeddings (n, dim) float32."""
        rows = self.conn.execute("SELECT id, embedding FROM chunks ORDER BY id").fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)
        return ids, vectors

    def text_hashes_of(self, path: str) -> list[str]:
        """The text digests of every chunk stored for the file `path`."""
        return [r[0] for r in self.conn.execute(
            "SELECT c.text_sha256 FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ?", (path,))]

    def file_chunk_counts(self) -> list[tuple[str, int]]:
        """(path, chunks) for every ingested file, by path."""
        return self.conn.execute("SELECT d.path, COUNT(c.id) FROM documents d LEFT JOIN chunks c "
                                 "ON c.doc_id = d.id GROUP BY d.path ORDER BY d.path").fetchall()

    def text_hashes(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT DISTINCT text_sha256 FROM chunks")}

    def counts(self) -> dict:
        one = lambda sql: self.conn.execute(sql).fetchone()[0]  # noqa: E731
        return {"files": one("SELECT COUNT(DISTINCT path) FROM documents"),
                "documents": one("SELECT COUNT(*) FROM documents"),
                "chunks": one("SELECT COUNT(*) FROM chunks"),
                "tokens": one("SELECT COALESCE(SUM(n_tokens), 0) FROM chunks"),
                # identical chunk text is cached once: the tokens the cache files hold
                "distinct_tokens": one("SELECT COALESCE(SUM(n), 0) FROM "
                                       "(SELECT MAX(n_tokens) AS n FROM chunks GROUP BY text_sha256)")}
