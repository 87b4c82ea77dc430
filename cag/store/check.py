"""`cag store check`: walk a whole store and say what is wrong with it, in plain lines.

What is checked: store.json; the catalog (SQLite's own integrity check, and every chunk row against
its digests); the FAISS index (its digest, the catalog generation it was built from, and that it
holds exactly the intact chunks); every cache space (its description, a cache file for every chunk
in each encoder or native space its file was last ingested for, every cache file's checksum and
that it is the cache its name says); and anything under caches/ that is not cag's (a symlink, a
stray file), which is reported and never touched. `cag.repair` fixes what is derived.
"""

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cag.errors import CagError
from cag.kv.serde import load_chunk_cache
from cag.progress import Progress
from cag.store.catalog import Catalog, doc_label
from cag.store.index_file import read_index
from cag.store.spaces import CacheSpace, Role, walk_caches
from cag.store.store import Store

log = logging.getLogger(__name__)
CACHES_TASK = "cache files checked"  # progress task


@dataclass(frozen=True)
class Problem:
    kind: str  # catalog | chunk | index | cache | missing | space | temp | orphan | foreign
    # (repair adds catalog-rows: a file that lost rows with a damaged catalog)
    message: str  # one line, for people
    path: str = ""  # the file it is about (a document for chunk/missing, else a store file)
    space: str = ""  # the cache space key (cache, missing, orphan, temp, space)

    @property
    def repairable(self) -> bool:
        """Whether `cag store check --repair` can fix it (foreign entries are never touched)."""
        return self.kind != "foreign"


@dataclass
class CheckReport:
    store: str
    problems: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)  # worth knowing, not wrong (one line each)

    def add(self, kind: str, message: str, path: str = "", space: str = "") -> None:
        self.problems.append(Problem(kind, message, str(path), space))

    def of_kind(self, *kinds: str) -> list:
        return [p for p in self.problems if p.kind in kinds]


def check_store(folder: Path | None = None, progress: Progress | None = None) -> CheckReport:
    progress = progress or Progress()
    store = Store.open(folder, catalog=False)  # store.json unreadable: a CagError, nothing else to do
    report = CheckReport(str(store.folder))
    catalog = _open_catalog(store, report)
    try:
        texts, recorded = _check_catalog(catalog, report) if catalog else (None, {})
        if texts is not None:
            _check_index(store, catalog, {c.id for chunks in texts.values() for c in chunks}, report)  # intact ids
        _check_caches(store, texts, recorded, report, progress)
    finally:
        if catalog is not None:
            catalog.close()
    return report


def _open_catalog(store: Store, report: CheckReport) -> Catalog | None:
    try:
        catalog = Catalog(store.folder / "catalog.sqlite")
        verdict = catalog.integrity()
    except CagError as exc:
        report.add("catalog", f"the catalog is unreadable: {exc}", store.folder / "catalog.sqlite")
        return None
    if verdict != "ok":
        report.add("catalog", f"the catalog is damaged (SQLite: {verdict})", store.folder / "catalog.sqlite")
    return catalog


def _check_catalog(catalog: Catalog, report: CheckReport) -> tuple[dict | None, dict]:
    """({text sha256: [intact ChunkRow]} of every chunk row, a damaged row's text digest mapping to no
    row (None when the catalog cannot be read); {path: the cache spaces it was ingested for})."""
    try:
        intact, damaged = catalog.verify_all()
        incomplete, first, recorded = catalog.incomplete_documents(), catalog.first_digest_rows(), catalog.file_spaces()
    except CagError as exc:
        report.add("catalog", f"the catalog's chunks cannot be read: {exc}", catalog.path)
        return None, {}
    for chunk, problem in damaged:
        report.add("chunk", f"chunk {chunk.idx} of {chunk.doc} is damaged: {problem}", chunk.doc_path)
    for path, locator, held, written in incomplete:
        report.add("chunk", f"{doc_label(path, locator)} has {held} chunk rows; it was written with {written}, numbered "
                            "from 0: a row was deleted or moved to another document", path)
    if first:
        report.notes.append(f"{first} chunk rows carry the first row digest, which does not cover their document "
                            "(written by an earlier cag): `cag store check --repair --store "
                            f"{catalog.path.parent}` seals them with the current one")
    texts = defaultdict(list)
    for chunk in intact:
        texts[chunk.text_sha256].append(chunk)
    for chunk, _ in damaged:  # its caches are not orphans: re-ingesting the file reuses them
        texts.setdefault(chunk.text_sha256, [])
    report.counts.update(chunks=len(intact) + len(damaged), damaged_chunks=len(damaged))
    return texts, recorded


def _check_index(store: Store, catalog: Catalog, wanted: set, report: CheckReport) -> None:
    index_file = store.folder / "index.faiss"
    try:
        index = read_index(store.folder)
    except ValueError as exc:
        report.add("index", str(exc), index_file)
        return
    if index.info.generation != catalog.generation:
        report.add("index", f"the FAISS index was built from catalog generation {index.info.generation}, the "
                            f"catalog is at {catalog.generation} (stale)", index_file)
        return
    if index.info.factory != store.index_factory(index.info.count):
        report.add("index", f"the FAISS index is {index.info.factory}, the store's factory "
                            f"({store.config.faiss_factory}) asks for {store.index_factory(index.info.count)}",
                   index_file)
    held = set(index.ids().tolist())
    if held != wanted:
        report.add("index", f"the FAISS index holds {len(held - wanted)} ids that are not intact chunks and "
                            f"lacks {len(wanted - held)} that are", index_file)


def _check_caches(store: Store, texts: dict | None, recorded: dict, report: CheckReport, progress: Progress) -> None:
    """Every cache file, and a cache for every chunk in each space its file was ingested for
    (`recorded`: {path: space keys}; a file ingested before that was recorded is expected in the
    spaces where it has any cache)."""
    spaces, entries = {}, list(walk_caches(store.caches_folder))
    for entry in entries:
        if entry.kind == "model":
            try:
                spaces[entry.space_key] = CacheSpace.from_json(json.loads(entry.path.read_text()))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                report.add("space", f"the cache space description {entry.path} is unreadable ({exc})",
                           entry.path, entry.space_key)
    caches = [e for e in entries if e.kind == "cache"]
    progress.start(CACHES_TASK, len(caches))
    for entry in entries:
        if entry.kind == "other":
            what = "a symlink" if entry.path.is_symlink() else "not a cag cache file"
            report.add("foreign", f"{entry.path} is {what}: left alone (remove it yourself)", entry.path)
        elif entry.kind == "temp":
            report.add("temp", f"{entry.path} is a temporary file left by a killed run", entry.path, entry.space_key)
    found = defaultdict(set)
    # per space: file key -> the text digest it caches (None: the catalog could not be read)
    keys = {k: None if texts is None else {s.file_key(t): t for t in texts} for k, s in spaces.items()}
    for entry in caches:
        found[entry.space_key].add(entry.file_key)
        _check_cache_file(entry, spaces.get(entry.space_key), keys.get(entry.space_key), report)
        progress.advance(CACHES_TASK)
    report.counts.update(cache_files=len(caches), spaces=len(spaces))
    if texts is None:
        return
    for key, space in spaces.items():
        if space.role is Role.TRANSLATED:  # made on demand: a missing translation is not a problem
            continue
        cached = {c.doc_path for file_key in found[key] if file_key in keys[key] for c in texts[keys[key][file_key]]}
        expected = lambda doc: key in recorded[doc] if doc in recorded else doc in cached  # noqa: E731
        missing = defaultdict(int)  # document -> chunks without a cache in this space
        for file_key, text in keys[key].items():
            if file_key not in found[key]:
                for doc in {c.doc_path for c in texts[text] if expected(c.doc_path)}:
                    missing[doc] += 1
        for doc, count in sorted(missing.items()):
            report.add("missing", f"{count} chunk(s) of {doc} have no {space.role} cache of {space.model_name}",
                       doc, key)


def _check_cache_file(entry, space: CacheSpace | None, keys: dict | None, report: CheckReport) -> None:
    """One cache file: `keys` maps its space's file keys to text digests (None: unknown)."""
    if space is None:
        report.add("orphan", f"{entry.path} is in a cache space with no description", entry.path, entry.space_key)
        return
    text = None if keys is None else keys.get(entry.file_key)
    if keys is not None and text is None:
        report.add("orphan", f"{entry.path} is the cache of no chunk in the catalog", entry.path, entry.space_key)
        return
    try:
        cache = load_chunk_cache(entry.path)
    except CagError as exc:
        report.add("cache", str(exc), entry.path, entry.space_key)
        return
    problem = space.mismatch(cache.meta, text or cache.meta.text_sha256)
    if problem is None and space.file_key(cache.meta.text_sha256) != entry.file_key:
        problem = "its name is not its key"
    if problem:
        report.add("cache", f"chunk cache {entry.path} is not the one its name says: {problem}", entry.path,
                   entry.space_key)
