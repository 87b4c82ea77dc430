"""The store's catalog: documents and chunks in SQLite, the single source of truth.

Every change to one file's documents is one transaction, so a kill at any moment leaves the catalog
either before or after that file. The generation counter increases with every change; the FAISS
index records the generation it was built from, so a stale index is detected and rebuilt.

Every chunk row is checked when it is read: its text against `text_sha256`, and the row (its
document, the document's chunk count, index, span, token count, text digest, embedding) against
`chunk_sha256`, both written with it (cag.store.row_digest; rows written before the digest covered
the document are checked as they were written). A row that fails is damaged: reading it raises
`DamagedChunkError` naming the document and the fix, and the index leaves it out, so no answer
comes from it; re-ingesting its file re-creates it. A document whose rows are not the ones it was
written with (a row deleted, or moved to another document) counts as changed too. Any SQLite
error (a malformed page, a file that is not a database) becomes a one-line CagError naming the file
and the fix.
"""

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cag.atomic import free_bytes
from cag.errors import CagError, DiskFullError
from cag.faults import fault_point
from cag.models.fingerprint import sha256_hex
from cag.store.row_digest import CURRENT, FIRST, RowPlace, digest_problem, row_digest

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,          -- absolute source file path
    locator TEXT NOT NULL,       -- '' for a whole file, 'L<n>' for a JSON Lines record, ...
    file_sha256 TEXT NOT NULL,
    n_chars INTEGER NOT NULL,
    n_chunks INTEGER,            -- chunks written with it (NULL: a document from before it was recorded)
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
    chunk_sha256 TEXT,           -- row_digest(...) of this row, checked when it is read
    digest_version INTEGER NOT NULL DEFAULT 1,  -- which row_digest (1: before it covered the document)
    UNIQUE (doc_id, idx)
);
CREATE INDEX IF NOT EXISTS chunks_text ON chunks(text_sha256);
CREATE TABLE IF NOT EXISTS file_spaces (  -- the cache spaces a file's chunks were last ingested for
    path TEXT NOT NULL,
    space TEXT NOT NULL,         -- CacheSpace.key
    PRIMARY KEY (path, space)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class CatalogError(CagError):
    """The catalog file cannot be read (damaged, or not a catalog)."""


class DamagedChunkError(CagError):
    """A chunk row failed its digests."""


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
    """A chunk row to write (its id and document are the catalog's to give) and its embedding."""

    row: ChunkRow
    embedding: np.ndarray  # (dim,) float32


class _Connection:
    """sqlite3's connection, its errors turned into one-line CatalogErrors naming the file and the fix."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = self._call(sqlite3.connect, str(path), isolation_level=None)  # explicit transactions

    def _call(self, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:  # the change is rolled back
                raise DiskFullError(self.path.parent, None, free_bytes(self.path.parent), self.path.name) from exc
            if "locked" in str(exc) or "busy" in str(exc):
                raise CatalogError(f"The store's catalog {self.path} is busy ({exc}); try again.") from exc
            raise self.damaged(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self.damaged(exc) from exc

    def damaged(self, exc: Exception) -> CatalogError:
        store = self.path.parent
        return CatalogError(f"The store's catalog {self.path} is damaged ({exc}): `cag store check --repair "
                            f"--store {store}` rebuilds it from what is intact and the documents still on disk.")

    def execute(self, sql: str, params=()):
        return self._call(self.conn.execute, sql, params)

    def executemany(self, sql: str, rows):
        return self._call(self.conn.executemany, sql, rows)

    def executescript(self, script: str):
        return self._call(self.conn.executescript, script)

    def rows(self, sql: str, params=()) -> list:
        """All rows of a query (fetched inside the error translation: damage may show while reading)."""
        return self._call(lambda: self.conn.execute(sql, params).fetchall())

    def close(self) -> None:
        self.conn.close()


class Catalog:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = _Connection(path)
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA busy_timeout = 10000")
        self.conn.executescript(_SCHEMA)
        self._upgrade()

    def _columns(self, table: str) -> set:
        return {r[1] for r in self.conn.rows(f"PRAGMA table_info({table})")}

    def _upgrade(self) -> None:
        """Columns added since a catalog was written are added, their rows marked as written before
        (`digest_version` 1, `n_chunks` NULL): no row's digest is rewritten, each is checked the
        way it was written. Catalogs written before rows had digests get them, computed from the
        rows as they are."""
        if {"digest_version", "chunk_sha256"} <= self._columns("chunks") and "n_chunks" in self._columns("documents"):
            return
        with self._transaction():  # (checked again inside: another process may have just done it)
            chunks = self._columns("chunks")
            if "digest_version" not in chunks:
                self.conn.execute(f"ALTER TABLE chunks ADD COLUMN digest_version INTEGER NOT NULL DEFAULT {FIRST}")
            if "n_chunks" not in self._columns("documents"):
                self.conn.execute("ALTER TABLE documents ADD COLUMN n_chunks INTEGER")
            if "chunk_sha256" in chunks:
                return
            self.conn.execute("ALTER TABLE chunks ADD COLUMN chunk_sha256 TEXT")
            rows = self.conn.rows(self._CHUNK_COLUMNS)
            self.conn.executemany("UPDATE chunks SET chunk_sha256 = ? WHERE id = ?",
                                  [(_digest_of(r), r[0]) for r in rows])
        log.info("catalog %s: %d chunk rows given digests", self.path, len(rows))

    def close(self) -> None:
        self.conn.close()

    @property
    def generation(self) -> int:
        row = self.conn.rows("SELECT value FROM meta WHERE key = 'generation'")
        return int(row[0][0]) if row else 0

    def _bump(self) -> None:
        self.conn.execute("INSERT INTO meta VALUES ('generation', ?) ON CONFLICT(key) DO UPDATE "
                          "SET value = excluded.value", (str(self.generation + 1),))

    def file_sha256(self, path: str) -> str | None:
        row = self.conn.rows("SELECT file_sha256 FROM documents WHERE path = ? LIMIT 1", (path,))
        return row[0][0] if row else None

    def paths(self) -> list[str]:
        return [r[0] for r in self.conn.rows("SELECT DISTINCT path FROM documents ORDER BY path")]

    def replace_file(self, path: str, file_sha256: str, documents: list, spaces: tuple = ()) -> None:
        """Atomically replace everything stored for `path` by `documents`: [(locator, n_chars, [NewChunk])],
        ingested for the cache spaces `spaces` (CacheSpace keys: the caches its chunks should have)."""
        with self._transaction():
            self.conn.execute("DELETE FROM documents WHERE path = ?", (path,))
            self.conn.execute("DELETE FROM file_spaces WHERE path = ?", (path,))
            self.conn.executemany("INSERT INTO file_spaces VALUES (?, ?)", [(path, key) for key in spaces])
            for locator, n_chars, chunks in documents:
                doc_id = self.conn.execute(
                    "INSERT INTO documents (path, locator, file_sha256, n_chars, n_chunks) VALUES (?, ?, ?, ?, ?)",
                    (path, locator, file_sha256, n_chars, len(chunks))).lastrowid
                place, rows = RowPlace(path, locator, len(chunks)), []
                for new in chunks:
                    c, embedding = new.row, np.asarray(new.embedding, dtype=np.float32).tobytes()
                    rows.append((doc_id, c.idx, c.text, c.char_start, c.char_end, c.text_sha256, c.n_tokens,
                                 embedding, row_digest(CURRENT, place, c.idx, c.char_start, c.char_end,
                                                       c.n_tokens, c.text_sha256, embedding), CURRENT))
                self.conn.executemany(
                    "INSERT INTO chunks (doc_id, idx, text, char_start, char_end, text_sha256, "
                    "n_tokens, embedding, chunk_sha256, digest_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                fault_point("in_transaction")
            self._bump()

    def rename_path(self, old: str, new: str) -> None:
        """Point `old`'s documents at `new` (a file that moved with its store); `new` must be unused.
        Rows whose digest covers their document and that verify are sealed to the new path (a
        damaged row stays damaged)."""
        with self._transaction():
            if self.conn.rows("SELECT 1 FROM documents WHERE path = ? LIMIT 1", (new,)):
                raise ValueError(f"{new} is already in the catalog")
            rows = self.conn.rows(f"{self._CHUNK_COLUMNS} WHERE d.path = ?", (old,))
            self.conn.execute("UPDATE documents SET path = ? WHERE path = ?", (new, old))
            self.conn.execute("UPDATE file_spaces SET path = ? WHERE path = ?", (new, old))
            moved = [(_digest_of(r, path=new), r[0]) for r in rows if r[11] == CURRENT and _problem_of(r) is None]
            self.conn.executemany("UPDATE chunks SET chunk_sha256 = ? WHERE id = ?", moved)
            self._bump()

    def remove_paths(self, paths: list[str]) -> int:
        if not paths:
            return 0
        with self._transaction():
            removed = sum(self.conn.execute("DELETE FROM documents WHERE path = ?", (p,)).rowcount
                          for p in paths)
            self.conn.executemany("DELETE FROM file_spaces WHERE path = ?", [(p,) for p in paths])
            self._bump()
        return removed

    def note_spaces(self, path: str, spaces: tuple) -> None:
        """Record that the (unchanged) file `path` was ingested for `spaces` too (CacheSpace keys)."""
        have = {r[0] for r in self.conn.rows("SELECT space FROM file_spaces WHERE path = ?", (path,))}
        if set(spaces) - have:
            with self._transaction():
                self.conn.executemany("INSERT OR IGNORE INTO file_spaces VALUES (?, ?)", [(path, k) for k in spaces])

    def file_spaces(self) -> dict[str, set]:
        """{path: the CacheSpace keys it was ingested for}; a file ingested before this was recorded
        is absent."""
        found: dict[str, set] = {}
        for path, key in self.conn.rows("SELECT path, space FROM file_spaces"):
            found.setdefault(path, set()).add(key)
        return found

    def _transaction(self):
        conn = self.conn

        class _Tx:
            def __enter__(self):
                conn.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type, exc, tb):
                if exc_type is None:
                    try:
                        conn.execute("COMMIT")
                    except CagError:  # (a full disk at commit: leave nothing open)
                        if conn.conn.in_transaction:
                            conn.conn.execute("ROLLBACK")
                        raise
                elif conn.conn.in_transaction:  # (SQLite may have rolled it back itself: a full disk)
                    conn.execute("ROLLBACK")

        return _Tx()

    # ---- chunk rows, verified ------------------------------------------------------------
    # a row: ChunkRow's fields, then embedding, chunk_sha256, digest_version, the document's n_chunks
    _CHUNK_COLUMNS = ("SELECT c.id, d.path, d.locator, c.idx, c.text, c.char_start, c.char_end, "
                      "c.text_sha256, c.n_tokens, c.embedding, c.chunk_sha256, c.digest_version, d.n_chunks "
                      "FROM chunks c JOIN documents d ON d.id = c.doc_id")

    def _checked(self, rows, strict: bool = True) -> list:
        """(ChunkRow, embedding bytes) of every row that passes its digests. A damaged row raises
        DamagedChunkError (`strict`) or is left out with a warning."""
        good = []
        for r in rows:
            chunk, embedding, problem = ChunkRow(*r[:9]), r[9], _problem_of(r)
            if problem is None:
                good.append((chunk, embedding))
                continue
            message = (f"Chunk {chunk.idx} of {chunk.doc} in the store's catalog is damaged ({problem}): "
                       f"re-ingest it with `cag ingest {chunk.doc_path} --store {self.path.parent}`, or run "
                       f"`cag store check --repair --store {self.path.parent}`.")
            if strict:
                raise DamagedChunkError(message)
            log.warning("%s It is left out.", message)
        return good

    def chunks_by_id(self, ids: list[int]) -> dict[int, ChunkRow]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.rows(f"{self._CHUNK_COLUMNS} WHERE c.id IN ({marks})", list(ids))
        return {chunk.id: chunk for chunk, _ in self._checked(rows)}

    def chunks_of(self, path: str, locator: str) -> list[ChunkRow]:
        """One document's chunks in document order."""
        rows = self.conn.rows(f"{self._CHUNK_COLUMNS} WHERE d.path = ? AND d.locator = ? ORDER BY c.idx",
                              (path, locator))
        return [chunk for chunk, _ in self._checked(rows)]

    def embeddings_of(self, ids: list[int], dim: int) -> np.ndarray:
        """Embeddings (len(ids), dim) float32 of the given chunk ids, in that order (rows verified)."""
        marks = ",".join("?" * len(ids))
        found = {chunk.id: emb for chunk, emb in self._checked(
            self.conn.rows(f"{self._CHUNK_COLUMNS} WHERE c.id IN ({marks})", list(ids)))}
        return np.frombuffer(b"".join(found[i] for i in ids), dtype=np.float32).reshape(-1, dim)

    def all_chunks(self) -> list[ChunkRow]:
        return [chunk for chunk, _ in self._checked(
            self.conn.rows(f"{self._CHUNK_COLUMNS} ORDER BY d.path, d.locator, c.idx"))]

    def embeddings(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """Chunk ids (n,) int64 and embeddings (n, dim) float32 of every intact row (the index's
        content: a damaged row is left out, with a warning)."""
        good = self._checked(self.conn.rows(f"{self._CHUNK_COLUMNS} ORDER BY c.id"), strict=False)
        ids = np.array([chunk.id for chunk, _ in good], dtype=np.int64)
        vectors = np.frombuffer(b"".join(emb for _, emb in good), dtype=np.float32).reshape(-1, dim)
        return ids, vectors

    def verify_all(self) -> tuple[list[ChunkRow], list[tuple[ChunkRow, str]]]:
        """(the intact chunk rows, the damaged ones with what is wrong), in document order."""
        intact, damaged = [], []
        for r in self.conn.rows(f"{self._CHUNK_COLUMNS} ORDER BY d.path, d.locator, c.idx"):
            chunk, problem = ChunkRow(*r[:9]), _problem_of(r)
            (damaged.append((chunk, problem)) if problem else intact.append(chunk))
        return intact, damaged

    def file_intact(self, path: str) -> bool:
        """Whether every chunk row of the file `path` passes its digests, and each of its documents
        holds exactly the rows it was written with."""
        rows = self.conn.rows(f"{self._CHUNK_COLUMNS} WHERE d.path = ?", (path,))
        return all(_problem_of(r) is None for r in rows) and not self.incomplete_documents(path)

    def incomplete_documents(self, path: str | None = None) -> list[tuple[str, str, int, int]]:
        """(path, locator, rows it holds, rows it should hold) of every document (of the file `path`,
        if given) whose rows are not exactly chunks 0..n-1 of the count it was written with (a row
        deleted, or moved to another document); documents from before the count was recorded: whose
        rows are not numbered 0..n-1."""
        where = "WHERE d.path = ?" if path is not None else ""
        return self.conn.rows(
            "SELECT d.path, d.locator, COUNT(c.id), COALESCE(d.n_chunks, COUNT(c.id)) FROM documents d "
            f"LEFT JOIN chunks c ON c.doc_id = d.id {where} GROUP BY d.id "
            "HAVING COUNT(c.id) != COALESCE(d.n_chunks, COUNT(c.id)) OR COALESCE(MIN(c.idx), 0) != 0 "
            "OR COALESCE(MAX(c.idx), -1) != COUNT(c.id) - 1 ORDER BY d.path, d.locator",
            () if path is None else (path,))

    def first_digest_rows(self) -> int:
        """How many chunk rows carry the first row digest (which does not cover their document)."""
        return self.conn.rows("SELECT COUNT(*) FROM chunks WHERE digest_version = ?", (FIRST,))[0][0]

    def seal_first_digests(self) -> tuple[int, int]:
        """Give the current row digest (it covers the document) to the rows that carry the first one,
        in every document whose rows all verify and are numbered 0..n-1 (the document's count is
        recorded from them): (rows, documents) sealed. Others are left as they are (re-ingest them).
        Hold the store's write lock."""
        incomplete = {(p, loc) for p, loc, _, _ in self.incomplete_documents()}
        docs = self.conn.rows("SELECT DISTINCT d.path, d.locator FROM chunks c JOIN documents d ON d.id = c.doc_id "
                              "WHERE c.digest_version = ?", (FIRST,))
        rows_sealed = docs_sealed = 0
        with self._transaction():  # one document's rows in memory at a time
            for path, locator in docs:
                rows = self.conn.rows(f"{self._CHUNK_COLUMNS} WHERE d.path = ? AND d.locator = ?", (path, locator))
                if (path, locator) in incomplete or any(r[11] != FIRST or _problem_of(r) is not None for r in rows):
                    continue
                self.conn.execute("UPDATE documents SET n_chunks = ? WHERE path = ? AND locator = ?",
                                  (len(rows), path, locator))
                self.conn.executemany("UPDATE chunks SET chunk_sha256 = ?, digest_version = ? WHERE id = ?",
                                      [(_digest_of(r, version=CURRENT, n_chunks=len(rows)), CURRENT, r[0]) for r in rows])
                rows_sealed, docs_sealed = rows_sealed + len(rows), docs_sealed + 1
        return rows_sealed, docs_sealed

    def text_hashes_of(self, path: str) -> list[str]:
        """The text digests of every chunk stored for the file `path`."""
        return [r[0] for r in self.conn.rows(
            "SELECT c.text_sha256 FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ?", (path,))]

    def file_chunk_counts(self) -> list[tuple[str, int]]:
        """(path, chunks) for every ingested file, by path."""
        return self.conn.rows("SELECT d.path, COUNT(c.id) FROM documents d LEFT JOIN chunks c "
                              "ON c.doc_id = d.id GROUP BY d.path ORDER BY d.path")

    def text_hashes(self) -> set[str]:
        return {r[0] for r in self.conn.rows("SELECT DISTINCT text_sha256 FROM chunks")}

    def integrity(self) -> str:
        """SQLite's own check of the file: "ok", or what it found."""
        rows = self.conn.rows("PRAGMA quick_check")
        return "; ".join(r[0] for r in rows[:5])

    def counts(self) -> dict:
        one = lambda sql: self.conn.rows(sql)[0][0]  # noqa: E731
        return {"files": one("SELECT COUNT(DISTINCT path) FROM documents"),
                "documents": one("SELECT COUNT(*) FROM documents"),
                "chunks": one("SELECT COUNT(*) FROM chunks"),
                "tokens": one("SELECT COALESCE(SUM(n_tokens), 0) FROM chunks"),
                # identical chunk text is cached once: the tokens the cache files hold
                "distinct_tokens": one("SELECT COALESCE(SUM(n), 0) FROM "
                                       "(SELECT MAX(n_tokens) AS n FROM chunks GROUP BY text_sha256)")}


def row_problem(chunk: ChunkRow, embedding: bytes, stored: str | None, version: int = CURRENT,
                n_chunks: int | None = None) -> str | None:
    """What is wrong with a chunk row (None: its text and the row match their digests); `version`:
    the row digest it carries, `n_chunks`: its document's chunk count (cag.store.row_digest)."""
    if sha256_hex(chunk.text.encode()) != chunk.text_sha256:
        return "its text does not match its sha256"
    return digest_problem(version, RowPlace(chunk.doc_path, chunk.doc_locator, n_chunks), chunk.idx, chunk.char_start,
                          chunk.char_end, chunk.n_tokens, chunk.text_sha256, embedding, stored)


def _problem_of(r) -> str | None:
    """row_problem of a row read with Catalog._CHUNK_COLUMNS."""
    return row_problem(ChunkRow(*r[:9]), r[9], r[10], r[11], r[12])


def _digest_of(r, path: str | None = None, version: int | None = None, n_chunks: int | None = None) -> str | None:
    """The digest a row read with Catalog._CHUNK_COLUMNS should carry (its path, version or count
    replaced where given)."""
    place = RowPlace(path or r[1], r[2], r[12] if n_chunks is None else n_chunks)
    return row_digest(version or r[11], place, r[3], r[5], r[6], r[8], r[7], r[9])
