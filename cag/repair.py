"""`cag store check --repair`: rebuild what is derived, and say what cannot be rebuilt.

- A damaged catalog is moved aside (`catalog.sqlite.damaged-TIME`, inside the store) and what can
  still be read of it and passes its digests is copied into a new one; files that lost rows are
  ingested again from disk.
- Damaged chunk rows, and damaged or missing chunk caches of the encoder and native spaces: their
  documents are ingested again from disk (unchanged chunks reuse their caches; nothing is
  prefilled twice). A document no longer on disk cannot be rebuilt: it is reported.
- Damaged translated caches are deleted and translated again (the next ask would do it anyway).
- Chunk rows that carry the first row digest (it does not cover their document) and verify are
  sealed with the current one.
- Temporary files and cache files no chunk refers to are deleted; anything under caches/ that is
  not cag's is reported and left alone.
- The FAISS index is rebuilt from the catalog.
Then the store is checked again.
"""

import logging
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cag.errors import CagError
from cag.ingest.pipeline import reingest
from cag.models import load_model
from cag.modes import ContextRequest, ModeOptions, Reads, modes
from cag.progress import Progress
from cag.prompt import prompt_layout
from cag.store.catalog import Catalog, ChunkRow, NewChunk, row_problem
from cag.store.check import CheckReport, check_store
from cag.store.row_digest import FIRST
from cag.store.spaces import Role, walk_caches
from cag.store.store import Store

log = logging.getLogger(__name__)


@dataclass
class RepairReport:
    before: CheckReport
    done: list = field(default_factory=list)  # what was repaired, in words
    not_repaired: list = field(default_factory=list)  # what could not be, and why
    after: CheckReport | None = None


def repair_store(folder: Path | None = None, progress: Progress | None = None) -> RepairReport:
    progress = progress or Progress()
    before = check_store(folder, progress)
    report = RepairReport(before)
    store = Store.open(folder, catalog=False)
    with store.lock():
        if before.of_kind("catalog"):
            _salvage_catalog(store, report)
        store.catalog = Catalog(store.folder / "catalog.sqlite")
        try:
            reingest_paths, also_for, retranslate = _plan(store, before, report)
            _reingest(store, reingest_paths, also_for, report, progress)
            _retranslate(store, retranslate, report)
            rows, documents = store.catalog.seal_first_digests()
            if rows:
                report.done.append(f"sealed {rows} chunk rows of {documents} document(s) with the row digest that "
                                   "covers their document (they carried the first one)")
            removed = store.collect_garbage()
            if removed:
                report.done.append(f"deleted {removed} temporary or unreferenced cache file(s)")
            store.rebuild_index()
            report.done.append("rebuilt the FAISS index from the catalog")
        finally:
            store.close()
    report.after = check_store(folder)
    return report


def _plan(store: Store, before: CheckReport, report: RepairReport) -> tuple[set, set, dict]:
    """(documents to ingest again, generators whose native caches they need, {space key: [texts]} of
    translations to make again); damaged cache files are deleted on the way."""
    spaces = {s.key: s for s in store.spaces()}
    paths, also_for, retranslate = set(), set(), defaultdict(list)
    paths |= {p.path for p in before.of_kind("chunk", "catalog-rows")}
    docs_of = defaultdict(set)  # text digest -> documents holding it (intact rows)
    for chunk in store.catalog.verify_all()[0]:
        docs_of[chunk.text_sha256].add(chunk.doc_path)
    for problem in before.of_kind("missing"):
        paths.add(problem.path)
        space = spaces.get(problem.space)
        if space is not None and space.role is Role.NATIVE:
            also_for.add(space.generator or space.model_name)
    texts_of = _texts_by_key(store, spaces)
    damaged = before.of_kind("cache")
    if damaged:
        report.done.append(f"deleted {len(damaged)} damaged chunk cache file(s)")
    for problem in damaged:
        Path(problem.path).unlink(missing_ok=True)
        space, text = spaces.get(problem.space), texts_of.get(Path(problem.path).name[:64])
        if space is None or text is None:
            continue
        if space.role is Role.TRANSLATED:
            retranslate[space.key].append(text)
        else:
            paths |= docs_of[text]
            if space.role is Role.NATIVE:
                also_for.add(space.generator or space.model_name)
    for problem in before.of_kind("space"):
        for entry in walk_caches(store.caches_folder, problem.space):
            if entry.kind in ("cache", "temp", "model"):
                entry.path.unlink(missing_ok=True)
        report.not_repaired.append(f"cache space {problem.space} had an unreadable description: its caches were "
                                   "deleted; ingest again with --also-for the generator it served")
    return paths, also_for, retranslate


def _texts_by_key(store: Store, spaces: dict) -> dict:
    """cache file key -> the text digest it caches, over every space and intact chunk."""
    texts = store.catalog.text_hashes()
    return {space.file_key(t): t for space in spaces.values() for t in texts}


def _reingest(store: Store, paths: set, also_for: set, report: RepairReport, progress: Progress) -> None:
    present = sorted(p for p in paths if Path(p).is_file())
    for gone in sorted(set(paths) - set(present)):
        report.not_repaired.append(f"{gone} is no longer on disk: its damaged or missing chunks cannot be "
                                   f"rebuilt (`cag store remove {gone} --store {store.folder}` drops it)")
    if not present:
        return
    try:
        result = reingest(store, present, tuple(sorted(also_for)), progress)
    except CagError as exc:
        report.not_repaired.append(f"ingesting {len(present)} file(s) again failed: {exc}")
        return
    report.done.append(f"ingested {len(present)} file(s) again ({result.caches_written} chunk caches prefilled)")


def _retranslate(store: Store, wanted: dict, report: RepairReport) -> None:
    spaces = {s.key: s for s in store.spaces()}
    for key, texts in wanted.items():
        space = spaces[key]
        mode = next((m for m in modes() if m.reads is Reads.ENCODER and m.translator_kind == space.kind
                     and not m.recomputes and not m.uses_window), None)
        rows = [c for c in store.catalog.verify_all()[0] if c.text_sha256 in set(texts)]
        try:
            if mode is None:
                raise CagError(f"no installed mode reads {space.kind} translators")
            lm = load_model(space.generator)
            mode.build(ContextRequest(store, lm, prompt_layout(lm.tokenizer), rows, [], ModeOptions()))
        except CagError as exc:
            report.not_repaired.append(f"{len(texts)} translation(s) into {space.generator} were not made again "
                                       f"({exc}); the next ask that needs them makes them")
            continue
        remade = sum(store.cache_path(space, t).is_file() for t in texts)
        report.done.append(f"translated {remade} chunk(s) into {space.generator} again")


# ---- a damaged catalog ------------------------------------------------------------------------
def _salvage_catalog(store: Store, report: RepairReport) -> None:
    """Move the damaged catalog aside; copy into a new one every file whose documents and chunk
    rows can all be read and pass their digests; mark the others for ingesting again."""
    path = store.folder / "catalog.sqlite"
    aside = path.with_name(f"catalog.sqlite.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
    old = sqlite3.connect(f"file:{aside}?mode=ro", uri=True)
    try:  # (catalogs from before the row digest covered the document lack the last column of each)
        documents, docs_complete = _readable(old, "documents", "id, path, locator, file_sha256, n_chars, "
                                             + _column_or(old, "documents", "n_chunks", "NULL"))
        chunks, chunks_complete = _readable(old, "chunks", "doc_id, idx, text, char_start, char_end, text_sha256, "
                                                           "n_tokens, embedding, chunk_sha256, "
                                            + _column_or(old, "chunks", "digest_version", str(FIRST)))
        # the file names may still be readable through the (path, locator) index when the rows are not
        named, _ = _readable(old, "documents", "path") if not docs_complete else ([], True)
    finally:
        old.close()
    new = Catalog(path)
    try:
        kept, redo = _copy_intact(new, documents, chunks, complete=docs_complete and chunks_complete)
    finally:
        new.close()
    redo = sorted((set(redo) | {row[1] for row in named}) - kept)
    report.done.append(f"moved the damaged catalog to {aside.name} and copied {len(kept)} intact file(s) into a new one")
    for lost in redo:
        report.before.add("catalog-rows", f"{lost} lost rows in the damaged catalog", lost)
    if not docs_complete and not named:
        report.not_repaired.append("the damaged catalog's file list is unreadable: ingest your folders again")


def _column_or(conn, table: str, column: str, default: str) -> str:
    """`column` if the damaged catalog's `table` has it, else the SQL value `default`."""
    try:
        present = {r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
    except sqlite3.DatabaseError:
        present = {column}  # unreadable schema: ask for it; unreadable rows are read one by one
    return column if column in present else default


def _readable(conn, table: str, columns: str) -> tuple[list, bool]:
    """The rows (rowid first) of `table` that can be read: (rows, whether all of them could)."""
    for sql in (f"SELECT rowid, {columns} FROM {table}", f"SELECT rowid, {columns} FROM {table} ORDER BY rowid"):
        try:  # (SQLite may answer from an intact index when the table's own pages are damaged)
            return conn.execute(sql).fetchall(), True
        except sqlite3.DatabaseError:
            pass
    rows, misses, rowid = [], 0, 0
    while misses < 1000:  # row by row past the damage, until a long run of absent rowids
        rowid += 1
        try:
            row = conn.execute(f"SELECT rowid, {columns} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            row = None
        misses = 0 if row else misses + 1
        if row:
            rows.append(row)
    return rows, False


def _copy_intact(new: Catalog, documents: list, chunks: list, complete: bool) -> tuple[set, list]:
    """Copy the files whose rows are all intact into `new`; (paths kept, paths to ingest again). When
    a table could not be read whole, a file's rows may be incomplete: it is ingested again from
    disk when it is there, else its intact rows are kept."""
    by_doc = defaultdict(list)
    for _, doc_id, *rest in chunks:
        by_doc[doc_id].append(rest)
    files = defaultdict(list)
    for _, doc_id, doc_path, locator, file_sha, n_chars, n_chunks in documents:
        files[doc_path].append((doc_id, locator, file_sha, n_chars, n_chunks))
    kept, redo = set(), []
    for doc_path, docs in sorted(files.items()):
        rows, intact = [], True
        for doc_id, locator, file_sha, n_chars, n_chunks in docs:
            new_chunks = []
            for idx, text, start, end, text_sha, n_tokens, embedding, stored, version in sorted(by_doc[doc_id]):
                row = ChunkRow(0, doc_path, locator, idx, text, start, end, text_sha, n_tokens)
                intact &= row_problem(row, embedding, stored, version, n_chunks) is None
                new_chunks.append(NewChunk(row, np.frombuffer(embedding, dtype=np.float32)))
            expected = n_chunks if n_chunks is not None else len(new_chunks)
            intact &= [c.row.idx for c in new_chunks] == list(range(expected))
            rows.append((locator, n_chars, new_chunks))
        if intact and (complete or not Path(doc_path).is_file()):
            new.replace_file(doc_path, docs[0][2], rows)
            kept.add(doc_path)
        else:
            redo.append(doc_path)
    return kept, redo
