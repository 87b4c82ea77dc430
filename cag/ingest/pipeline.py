"""`cag ingest`: files -> documents -> chunks -> embeddings + chunk caches -> store.

Per file: read, chunk (encoder tokens), prefill the chunks whose cache file is missing (in batches,
after the model's answer-time prefix; small files share a batch), embed, then replace the file's
catalog rows in one transaction. Unchanged files (same sha256) are skipped without model work;
files that disappeared from the ingested folders are removed. The FAISS index is rebuilt from the
catalog when it changed, and cache files no chunk refers to are deleted. A run killed at any point and started again ends
with the same store as an uninterrupted run.
"""

import hashlib
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from cag.atomic import atomic_write
from cag.defaults import DEFAULT_CHUNK_TOKENS, DEFAULT_EMBEDDER, DEFAULT_ENCODER
from cag.errors import CagError, DiskFullError
from cag.faults import fault_point
from cag.ingest.chunking import Chunker, check_chunking
from cag.ingest.reading import UnreadableFile, discover, read_file
from cag.kv.chunk_cache import ids_sha256, prefill_chunks
from cag.kv.serde import CACHE_DTYPE_HELP, DEFAULT_CACHE_DTYPE, check_cache_dtype, save_chunk_cache
from cag.models import load_model
from cag.models.loading import check_dtype, device_setting, dtype_setting
from cag.models.fingerprint import sha256_hex
from cag.progress import Progress
from cag.prompt import prompt_layout
from cag.store.catalog import ChunkRow, NewChunk, doc_label
from cag.store.spaces import CacheSpace, Role
from cag.store.store import Store, StoreConfig, check_faiss_factory, store_folder
from cag.retrieval import load_embedder
from cag.settings import check_at_least, comma_list, setting
from indexes.embedder import Embedder
from indexes.factory import AUTO

log = logging.getLogger(__name__)
FILES_TASK, PREFILL_TASK = "files", "chunks prefilled"  # progress tasks
INGEST_AGAIN = ("the files ingested before it are kept: free space (or move the store's caches/ to a bigger disk "
                "and leave a link in its place) and run the same ingest again; it goes on where it stopped.")


@dataclass(frozen=True)
class IngestOptions:
    """How files are ingested: `cag ingest`'s settings (its options come from these fields)."""

    encoder: str = setting(DEFAULT_ENCODER, "The one model that prefills every chunk. With Qwen generators, "
                           "qwen2.5-coder-0.5b is better: their own caches for the 0.5B, better translations into "
                           "the 1.5B, half the bytes per token, about 2.3x slower to ingest (docs/results.md, "
                           "'Which encoder').")
    embedder: str = setting(DEFAULT_EMBEDDER, "sentence-transformers model for retrieval.")
    chunk_tokens: int = setting(DEFAULT_CHUNK_TOKENS, "Chunk size in encoder tokens.")
    chunk_overlap: int = 0
    faiss_factory: str | None = setting(
        None, "The store's vector index: auto (Flat up to 1,000,000 chunks, then HNSW32), or a FAISS index_factory "
        "string (Flat, HNSW32, IVF1024,SQ8, ...). Recorded in the store; given again with another value, the index "
        "is rebuilt. Default: the store's own (auto for a new store).")
    cache_dtype: str = setting(DEFAULT_CACHE_DTYPE, CACHE_DTYPE_HELP)
    also_for: tuple = setting((), "Also store this generator's own native caches (repeatable).",
                              cli_type=list[str] | None, parse=comma_list, show=lambda d: None)
    batch_size: int = setting(8, "Chunks per prefill batch.", minimum=1)
    device: str = device_setting()
    dtype: str = dtype_setting()  # the encoder's prefill (storage: cache_dtype)
    also_for_dtype: str | None = None  # the also_for models' compute dtype (default: dtype)
    # False: chunk, embed and catalog with the encoder but skip its cache prefill, for stores read
    # only natively (an eval without translator modes); a later ingest with True fills them in
    encoder_caches: bool = True
    # other stores whose identical chunk caches (same model, prefix and text: the same file key) are
    # hard-linked (copied across file systems) instead of prefilled again
    reuse_from: tuple = setting((), "Another store: chunk caches it holds for the same model, prefix and text are "
                                "hard-linked instead of prefilled (repeatable).", flag="--reuse-caches-from",
                                cli_type=list[Path] | None, parse=comma_list, show=lambda d: None)

    def __post_init__(self):
        check_cache_dtype(self.cache_dtype)
        check_chunking(self.chunk_tokens, self.chunk_overlap)
        check_at_least("batch-size", self.batch_size)
        check_dtype(self.dtype)
        if self.also_for_dtype is not None:
            check_dtype(self.also_for_dtype)


@dataclass
class IngestReport:
    store: str
    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    skipped: list = field(default_factory=list)  # (path, reason)
    documents: int = 0
    chunks_new: int = 0
    tokens_prefilled: int = 0
    caches_written: int = 0
    caches_reused: int = 0  # linked from another store (IngestOptions.reuse_from)
    chunks_total: int = 0
    tokens_total: int = 0
    bytes_on_disk: int = 0
    seconds: float = 0.0


@dataclass
class ModelSpace:
    """One model whose chunk caches this ingest writes, with its prompt prefix. `lm`: a LoadedModel
    (or, on a Ray driver, a ModelIdentity: the workers hold the models)."""

    lm: object
    prefix: tuple
    space: CacheSpace


def model_space(lm, role: Role) -> ModelSpace:
    prefix = prompt_layout(lm.tokenizer).prefix_ids
    return ModelSpace(lm, prefix, CacheSpace(lm.name, lm.fingerprint, ids_sha256(prefix), role,
                                             generator=lm.name if role is Role.NATIVE else ""))


@dataclass
class FilePlan:
    """A new or changed file, read and chunked: what its prefill and its commit need."""

    path: Path
    sha256: str
    chunked: list  # [(Document, [Chunk])]
    spaces: tuple = ()  # the CacheSpace keys this ingest fills: the caches its chunks should have

    @property
    def pending(self) -> list:
        """(document, chunk) pairs in order: prefill batches span documents (a JSON Lines file of
        short records would otherwise prefill one chunk at a time)."""
        return [(doc, chunk) for doc, chunks in self.chunked for chunk in chunks]


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ingest(paths: list, store_dir: Path | None = None, options: IngestOptions = IngestOptions(),
           progress: Progress | None = None, encoder_lm=None, embedder: Embedder | None = None) -> IngestReport:
    """Ingest `paths` into the store at `store_dir`. A long-lived caller (the server) passes the
    encoder (`encoder_lm`, a LoadedModel of `options.encoder`) and the embedder it keeps loaded."""
    start = time.perf_counter()
    progress = progress or Progress()
    roots = check_paths(paths)
    check_existing_store(store_dir, options)
    embedder = embedder or load_embedder(options.embedder)
    if embedder.name != options.embedder:
        raise CagError(f"The embedder given is {embedder.name}, the options name {options.embedder}.")
    if options.faiss_factory is not None:
        check_faiss_factory(options.faiss_factory, embedder.dim)  # before any model work
    encoder = encoder_lm or load_model(options.encoder, options.dtype, options.device)
    store = Store.open_or_create(store_dir, store_config(encoder, embedder, options))
    try:
        with store.lock():
            if options.faiss_factory is not None:
                store.set_faiss_factory(options.faiss_factory)
            report = _ingest_locked(roots, store, encoder, embedder, options, progress)
    except DiskFullError as exc:
        raise exc.where(f"store {store.folder}", INGEST_AGAIN) from exc
    finally:
        store.close()
    report.seconds = time.perf_counter() - start
    return report


def reingest(store: Store, paths: list, also_for: tuple = (), progress: Progress | None = None) -> IngestReport:
    """Ingest `paths` again into an open store whose write lock the caller holds (store repair),
    with the store's own encoder and embedder, and `also_for` generators' native caches."""
    options = IngestOptions(encoder=store.config.encoder, embedder=store.config.embedder, also_for=tuple(also_for))
    encoder = load_model(options.encoder, options.dtype, options.device)
    if encoder.fingerprint != store.config.encoder_fingerprint:
        raise CagError(f"Store {store.folder} was built with another version of {store.config.encoder} "
                       f"({store.config.encoder_fingerprint[:12]}, now {encoder.fingerprint[:12]}): its caches "
                       "cannot be re-created; re-ingest into a new store.")
    return _ingest_locked([Path(p) for p in paths], store, encoder, load_embedder(options.embedder), options,
                          progress or Progress())


STORE_SETTINGS = ("encoder", "embedder", "chunk_tokens", "cache_dtype")  # an existing store's own unless given


def store_settings(store_dir, names=STORE_SETTINGS) -> dict:
    """An existing store's own values of IngestOptions' `names` (of STORE_SETTINGS); {} for a new
    store. So `cag ingest DOC --store S`, the fix the store's messages print, works whatever S was
    built with."""
    folder = store_folder(store_dir)
    if not (folder / "store.json").is_file():
        return {}
    have = Store.open(folder, catalog=False).config
    return {name: getattr(have, name) for name in names}


def check_paths(paths: list) -> list[Path]:
    roots = [Path(p).expanduser() for p in paths]
    missing = [str(p) for p in roots if not p.exists()]
    if missing:
        raise CagError(f"No such file or folder: {', '.join(missing)}.")
    return roots


def store_config(encoder, embedder: Embedder, options: IngestOptions) -> StoreConfig:
    """The config of a new store (an existing store keeps its own chunking and dtype)."""
    return StoreConfig(encoder.name, encoder.fingerprint, options.embedder, embedder.dim,
                       options.faiss_factory or AUTO, options.chunk_tokens, options.chunk_overlap,
                       options.cache_dtype)


def ingest_spaces(encoder, also: list, options: IngestOptions) -> list[ModelSpace]:
    """The cache spaces an ingest fills: the encoder's (unless options.encoder_caches is off and no
    also-for model is the encoder) and each other also-for model's native one."""
    # an also-for model that is the encoder reads the encoder's own caches (one space)
    own = [lm for lm in also if lm.fingerprint != encoder.fingerprint]
    spaces = [model_space(encoder, Role.ENCODER)] if options.encoder_caches or len(own) < len(also) else []
    return spaces + [model_space(lm, Role.NATIVE) for lm in own]


def check_existing_store(store_dir, options: IngestOptions) -> None:
    """Refuse a store built with another embedder before loading any model."""
    folder = store_folder(store_dir)  # a URL refused here, before any model or cluster
    if (folder / "store.json").is_file():
        existing = Store.open(folder)
        existing.close()
        existing.check_embedder(options.embedder)


def _ingest_locked(roots: list, store: Store, encoder, embedder: Embedder, options: IngestOptions,
                   progress: Progress) -> IngestReport:
    config = store.config  # an existing store keeps its own chunking and dtype
    also = [load_model(m, options.also_for_dtype or options.dtype, options.device) for m in options.also_for]
    spaces = ingest_spaces(encoder, also, options)
    for s in spaces:
        store.register_space(s.space)
    donors = reuse_stores(options.reuse_from, store)
    chunker = Chunker(encoder.tokenizer, config.chunk_tokens, config.chunk_overlap)
    report = IngestReport(str(store.folder))
    files = discover(roots)
    report.files_seen = len(files)
    progress.start(FILES_TASK, len(files))
    progress.start(PREFILL_TASK)  # the clock of its rate starts here, before the first batch
    group = FileGroup(store, spaces, embedder, encoder.tokenizer, config, report, progress,
                      max(1, options.batch_size), donors)
    for path in files:
        plan = plan_file(path, store, chunker, spaces, report)
        if plan is None:
            progress.advance(FILES_TASK)
        else:
            group.add(plan)
    group.flush()
    finish_ingest(store, roots, files, report)
    return report


@dataclass
class FileGroup:
    """Files read and chunked, waiting until their chunks fill a prefill batch: small files (one
    paragraph each) are prefilled together, not one short batch per file. Each file's rows are
    committed after its caches, in order, so a killed ingest leaves whole files or none."""

    store: Store
    spaces: list
    embedder: Embedder
    encoder_tokenizer: object
    config: StoreConfig
    report: IngestReport
    progress: Progress
    batch_size: int
    donors: tuple = ()
    plans: list = field(default_factory=list)
    waiting: int = 0  # chunks of the waiting plans

    def add(self, plan: FilePlan) -> None:
        self.plans.append(plan)
        self.waiting += sum(len(chunks) for _, chunks in plan.chunked)
        if self.waiting >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Prefill the waiting files' missing caches together, embed their chunks in one call, and
        commit each file."""
        plans, self.plans, self.waiting = self.plans, [], 0
        if not plans:
            return
        pending = [pair for plan in plans for pair in plan.pending]
        for s in self.spaces:
            _prefill_missing(self.store, s, pending, self.config, self.report, self.progress, self.batch_size,
                             self.donors)
        vectors = self.embedder.encode([chunk.text for _, chunk in pending]) if pending else []
        start = 0
        for plan in plans:
            count = sum(len(chunks) for _, chunks in plan.chunked)
            commit_file(self.store, plan, self.embedder, self.encoder_tokenizer, self.report,
                        vectors[start:start + count])
            start += count
            self.progress.advance(FILES_TASK)


def finish_ingest(store: Store, roots: list, files: list, report: IngestReport) -> None:
    """After every file: vanished files removed, the index rebuilt if the catalog changed, cache
    files no chunk refers to deleted, the store's totals counted."""
    report.files_removed = _remove_vanished(store, roots, set(map(str, files)))
    store.index()  # rebuilt from the catalog if anything changed
    fault_point("index_saved")
    store.collect_garbage()
    counts = store.catalog.counts()
    report.chunks_total, report.tokens_total = counts["chunks"], counts["tokens"]
    report.bytes_on_disk = store.bytes_on_disk()


def plan_file(path: Path, store: Store, chunker: Chunker, spaces: list, report: IngestReport,
              has_cache=None) -> FilePlan | None:
    """`path` read and chunked; None when it is unchanged (the same sha256, every chunk's cache
    there, its rows intact) or unreadable, counted in `report`. `has_cache(space, text_sha256)`:
    whether a chunk's cache is there (default: its file exists; a Ray driver adds those in flight)."""
    keys = tuple(s.space.key for s in spaces)
    try:
        sha = _file_sha256(path)
        if (store.catalog.file_sha256(str(path)) == sha and _caches_complete(store, path, spaces, has_cache)
                and store.catalog.file_intact(str(path))):  # a damaged chunk row makes the file changed
            store.catalog.note_spaces(str(path), keys)
            report.files_unchanged += 1
            return None
        documents = read_file(path)
    except (UnreadableFile, OSError) as exc:
        log.warning("skipped %s: %s", path, exc)
        report.skipped.append((str(path), str(exc)))
        return None
    return FilePlan(path, sha, [(doc, chunker.split(doc.text)) for doc in documents], keys)


def embed_plan(embedder: Embedder, plan: FilePlan):
    """The embeddings of a plan's chunks, in order ((n, dim) float32)."""
    return embedder.encode([chunk.text for _, chunk in plan.pending])


def commit_file(store: Store, plan: FilePlan, embedder: Embedder, encoder_tokenizer, report: IngestReport,
                vectors=None) -> None:
    """Replace the file's catalog rows by the plan's in one transaction (its chunks embedded here
    unless `vectors` are given); its caches must be there."""
    vectors = iter(embed_plan(embedder, plan) if vectors is None else vectors)
    count_tokens = lambda text: len(encoder_tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    rows = [(doc.locator, len(doc.text), [
        NewChunk(ChunkRow(0, str(plan.path), doc.locator, c.idx, c.text, c.char_start, c.char_end,
                          sha256_hex(c.text.encode()), count_tokens(c.text)), next(vectors))
        for c in chunks]) for doc, chunks in plan.chunked]
    fault_point("before_commit")
    store.catalog.replace_file(str(plan.path), plan.sha256, rows, plan.spaces)
    fault_point("after_commit")
    report.files_ingested += 1
    report.documents += len(rows)
    report.chunks_new += sum(len(r[2]) for r in rows)


def _caches_complete(store: Store, path: Path, spaces: list, has_cache=None) -> bool:
    """Every chunk of `path` has a cache file in every requested space (e.g. a new --also-for)."""
    has_cache = has_cache or (lambda space, text: store.cache_path(space, text).is_file())
    texts = store.catalog.text_hashes_of(str(path))
    return all(has_cache(s.space, t) for s in spaces for t in texts)


def chunks_to_prefill(store: Store, space: CacheSpace, pending: list, report: IngestReport,
                      donors: tuple = (), seen: set | None = None) -> list:
    """The (doc, chunk) pairs of `pending` whose cache in `space` is missing, identical texts once
    (`seen`: the text digests already taken, shared across calls by a Ray driver); a cache a donor
    store holds is linked instead (counted in `report`)."""
    todo, seen = [], set() if seen is None else seen
    for doc, chunk in pending:
        key = sha256_hex(chunk.text.encode())
        if key in seen or store.cache_path(space, key).is_file():
            continue
        seen.add(key)
        if _link_from_donor(store, space, key, donors):
            report.caches_reused += 1
        else:
            todo.append((doc, chunk))
    return todo


def _prefill_missing(store: Store, s: ModelSpace, pending: list, config: StoreConfig,
                     report: IngestReport, progress: Progress, batch_size: int, donors: tuple = ()) -> None:
    """Prefill (doc, chunk) pairs whose cache file is missing (or link it from a donor store);
    identical texts once."""
    todo = chunks_to_prefill(store, s.space, pending, report, donors)
    progress.grow(PREFILL_TASK, len(todo))
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        caches = prefill_chunks(s.lm, [c.text for _, c in batch], s.prefix, batch_size=batch_size,
                                doc_ids=[doc_label(d.path, d.locator) for d, _ in batch],
                                chunk_indices=[c.idx for _, c in batch])
        for cache in caches:
            save_chunk_cache(cache, store.cache_path(s.space, cache.meta.text_sha256), config.cache_dtype)
            fault_point("cache_written")
            report.caches_written += 1
        tokens = sum(c.num_tokens for c in caches)
        report.tokens_prefilled += tokens
        progress.advance(PREFILL_TASK, len(caches), tokens=tokens)


def reuse_stores(folders: tuple, store: Store) -> tuple:
    """The donor stores' folders, checked: a store that exists and stores caches in our dtype."""
    donors = []
    for folder in folders:
        folder = Path(folder).expanduser()
        if not (folder / "store.json").is_file():
            raise CagError(f"--reuse-caches-from {folder}: not a cag store (no store.json there).")
        if folder.resolve() == store.folder.resolve():
            continue
        donor = Store.open(folder)
        donor.close()
        if donor.config.cache_dtype != store.config.cache_dtype:
            raise CagError(f"--reuse-caches-from {folder}: it stores {donor.config.cache_dtype} caches, "
                           f"this store {store.config.cache_dtype}.")
        donors.append(donor)
    return tuple(donors)


def _link_from_donor(store: Store, space: CacheSpace, text_sha256: str, donors: tuple) -> bool:
    """Hard-link (else copy) the cache of one chunk text from the first donor that holds it. The
    file key names model, prefix and text, so the donor's file is exactly the cache we would write;
    cache files are never rewritten in place (atomic replace), so sharing an inode is safe."""
    for donor in donors:
        source = donor.cache_path(space, text_sha256)
        if source.is_file():
            atomic_write(store.cache_path(space, text_sha256), lambda tmp: _link_or_copy(source, tmp))
            return True
    return False


def _link_or_copy(source: Path, tmp: Path) -> None:
    tmp.unlink()  # atomic_write's empty temporary file: the link takes its name
    try:
        os.link(source, tmp)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(source, tmp)


def _remove_vanished(store: Store, roots: list, present: set) -> int:
    """Remove catalog files under the ingested folders that no longer exist."""
    folders = [r.resolve() for r in roots if r.is_dir()]
    gone = [p for p in store.catalog.paths() if p not in present
            and any(Path(p).is_relative_to(f) for f in folders) and not Path(p).exists()]
    if gone:
        log.info("removing %d vanished file(s)", len(gone))
        store.catalog.remove_paths(gone)
    return len(gone)
