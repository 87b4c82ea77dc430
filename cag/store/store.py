"""A cag store on disk.

    STORE/
      store.json                  StoreConfig: encoder, embedder, FAISS factory, chunking, dtype
      catalog.sqlite              documents and chunks (text, spans, embeddings): the source of truth
      index.faiss, index.json     FAISS index over chunk ids + sidecar (factory, dim, embedder,
                                  count, catalog generation); rebuilt from the catalog when stale
                                  or not the kind store.json's factory asks for at its size
      caches/<space>/model.json   one folder per (model fingerprint, native prefix): name, role
      caches/<space>/<kk>/<key>.safetensors
                                  chunk caches; key = sha256(model fingerprint, prefix digest,
                                  chunk text digest, format version): identical text is stored once
"""

import contextlib
import fcntl
import json
import logging
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cag.atomic import atomic_write_text
from cag.defaults import DEFAULT_CHUNK_TOKENS
from cag.errors import CagError, CorruptCacheError, DiskFullError, StoreBusyError
from cag.home import cag_home
from cag.kv.chunk_cache import ChunkCache
from cag.kv.serde import DEFAULT_CACHE_DTYPE, load_chunk_cache
from cag.store.catalog import Catalog
from cag.store.index_file import load_index, save_index
from cag.store.spaces import CacheSpace, Role, files_bytes, space_descriptions, walk_caches
from indexes.factory import AUTO, check_factory, resolve
from indexes.faiss_index import IndexSetupError, VectorIndex

log = logging.getLogger(__name__)
STORE_FORMAT = 1
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")  # s3://b/x, also as pathlib leaves it (s3:/b/x)


def default_store_dir() -> Path:
    return cag_home() / "stores" / "default"


def store_folder(folder: Path | None) -> Path:
    """The store folder `--store` names (default: the cag home's), refusing a URL and a file."""
    if folder and _URL.match(str(folder)):
        raise CagError(f"--store {folder}: a URL; a store is a folder on a POSIX file system (its catalog "
                       "is SQLite, its files are replaced by atomic renames): pass a path, on a cluster one "
                       "every node mounts (NFS, CephFS, Lustre).")
    folder = Path(folder).expanduser() if folder else default_store_dir()
    if folder.exists() and not folder.is_dir():
        raise CagError(f"--store {folder} is a file, not a store folder: pass a folder (a new one is created).")
    for parent in folder.parents:  # the nearest one there must be a folder to create the store in
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                what = "a file, not a folder" if parent.is_file() else "not a folder (a broken link?)"
                raise CagError(f"--store {folder}: {parent} is {what}; pass a store folder whose parents are folders.")
            break
    return folder


def check_faiss_factory(factory: str, dim: int) -> None:
    """CagError (one line) unless `factory` is auto or a FAISS factory string for `dim`-d vectors."""
    try:
        check_factory(factory, dim)
    except IndexSetupError as exc:
        raise CagError(f"--faiss-factory: {exc}") from exc


def check_caches_folder(caches: Path) -> None:
    """CagError (one line) unless `caches` is absent or a folder. It may be a symlink to a folder
    (caches moved to a bigger disk); one that leads nowhere (a disk not mounted) is refused, where
    ingest would otherwise write nothing and ask find no caches."""
    if caches.is_symlink() and not caches.is_dir():
        raise CagError(f"The store's {caches} is a link to {os.readlink(caches)}, which is not a folder (a disk not "
                       f"mounted?): mount it, or remove the link ({caches}) to start the caches afresh.")
    if caches.exists() and not caches.is_dir():
        raise CagError(f"The store's {caches} is a file, not its cache folder: move it out of the store.")


@dataclass(frozen=True)
class StoreConfig:
    encoder: str
    encoder_fingerprint: str
    embedder: str
    embedding_dim: int
    faiss_factory: str = AUTO  # a FAISS index_factory string, or auto (indexes.factory)
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    chunk_overlap: int = 0
    cache_dtype: str = DEFAULT_CACHE_DTYPE
    format_version: int = STORE_FORMAT


class Store:
    def __init__(self, folder: Path, config: StoreConfig, catalog: bool = True):
        self.folder = Path(folder)
        self.config = config
        check_caches_folder(self.caches_folder)
        self.catalog = Catalog(self.folder / "catalog.sqlite") if catalog else None
        self._index: VectorIndex | None = None
        self.memory = None  # a MemoryTier (cag.store.memory_tier) that read_cache serves first, or None

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, folder: Path | None = None, catalog: bool = True) -> "Store":
        """The store at `folder`; `catalog=False` opens it without its catalog (store check reads a
        damaged one on its own)."""
        folder = store_folder(folder)
        config_path = folder / "store.json"
        if not config_path.is_file():
            raise CagError(f"No cag store at {folder}: run `cag ingest PATH --store {folder}` first.")
        try:
            config = StoreConfig(**json.loads(config_path.read_text()))
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
            raise CagError(f"{config_path} is unreadable ({exc}); re-create the store.") from exc
        if config.format_version != STORE_FORMAT:
            raise CagError(f"Store {folder} has format {config.format_version}; this cag reads "
                           f"{STORE_FORMAT}. Re-ingest into a new store.")
        return cls(folder, config, catalog)

    @classmethod
    def open_or_create(cls, folder: Path | None, wanted: StoreConfig) -> "Store":
        """Open the store at `folder`, refusing one built by another encoder or embedder; or create it."""
        folder = store_folder(folder)
        if (folder / "store.json").is_file():
            store = cls.open(folder)
            store._check_compatible(wanted)
            return store
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "store.json", json.dumps(asdict(wanted), indent=2))
        return cls(folder, wanted)

    def check_embedder(self, embedder: str) -> None:
        if self.config.embedder != embedder:
            raise CagError(f"Store {self.folder} was built with embedder {self.config.embedder}, not "
                           f"{embedder}: use --embedder {self.config.embedder} or another --store.")

    def _check_compatible(self, wanted: StoreConfig) -> None:
        have = self.config
        if have.encoder_fingerprint != wanted.encoder_fingerprint:
            raise CagError(f"Store {self.folder} was built with encoder {have.encoder} "
                           f"({have.encoder_fingerprint[:12]}), not {wanted.encoder} "
                           f"({wanted.encoder_fingerprint[:12]}): use --encoder {have.encoder} or another --store.")
        self.check_embedder(wanted.embedder)
        for field in ("chunk_tokens", "chunk_overlap", "cache_dtype"):
            if getattr(have, field) != getattr(wanted, field):
                log.warning("store %s keeps its %s=%s (asked %s)", self.folder, field,
                            getattr(have, field), getattr(wanted, field))

    def set_faiss_factory(self, factory: str) -> None:
        """Record another FAISS factory (`auto` or an index_factory string) in store.json; the next
        `index()` rebuilds the index with it. Hold `lock()` around it."""
        if factory != self.config.faiss_factory:
            check_faiss_factory(factory, self.config.embedding_dim)
            log.info("store %s: FAISS factory %s -> %s", self.folder, self.config.faiss_factory, factory)
            self.config = replace(self.config, faiss_factory=factory)
            atomic_write_text(self.folder / "store.json", json.dumps(asdict(self.config), indent=2))

    def close(self) -> None:
        if self.catalog is not None:
            self.catalog.close()

    @contextlib.contextmanager
    def lock(self):
        """An exclusive lock for writers: a second `cag ingest` on the same store is refused."""
        with open(self.folder / "write.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise StoreBusyError(f"Another cag process is writing to store {self.folder}; "
                               "wait for it to finish.") from exc
            yield

    # ---- cache files ---------------------------------------------------------------------
    @property
    def caches_folder(self) -> Path:
        return self.folder / "caches"

    def register_space(self, space: CacheSpace) -> None:
        path = self.caches_folder / space.key / "model.json"
        if not path.is_file():
            atomic_write_text(path, json.dumps(asdict(space), indent=2))

    def spaces(self) -> list[CacheSpace]:
        """The registered cache spaces (an unreadable model.json is left out, with a warning)."""
        found = []
        for path in space_descriptions(self.caches_folder):
            try:
                found.append(CacheSpace.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                log.warning("unreadable cache space description %s (%s); ignored", path, exc)
        return found

    def cache_path(self, space: CacheSpace, text_sha256: str) -> Path:
        key = space.file_key(text_sha256)
        return self.caches_folder / space.key / key[:2] / f"{key}.safetensors"

    def read_cache(self, space: CacheSpace, row) -> ChunkCache:
        """The verified chunk cache of catalog `row` in `space`: its checksum, and that it is the
        cache of this row's text for this space's model and prefix. A damaged file is derived data:
        it is removed (so that re-ingesting re-creates it) and the error says so. With a memory
        tier, a cache read before (verified then) comes from memory."""
        path = self.cache_path(space, row.text_sha256)
        key = (space.key, row.text_sha256)
        cache = self.memory.get(key) if self.memory is not None else None
        if cache is not None:
            return cache
        try:
            cache = load_chunk_cache(path)
            problem = space.mismatch(cache.meta, row.text_sha256)
            if problem:
                raise CorruptCacheError(f"Chunk cache {path} is not the one its name says: {problem}.")
            if self.memory is not None:
                self.memory.put(key, cache)
            return cache
        except CorruptCacheError as exc:
            path.unlink(missing_ok=True)
            raise CagError(f"{exc} It was removed; re-ingest its document to re-create it: "
                           f"`{self.remake_command(space, [row.doc_path])}`.") from exc

    def remake_command(self, space: CacheSpace, paths: list[str]) -> str:
        """The command that re-creates the caches of `paths`' chunks in `space` (a native space's
        with --also-for its generator; a translated space's are re-made by the next ask anyway)."""
        also = f" --also-for {space.generator or space.model_name}" if space.role is Role.NATIVE else ""
        return f"cag ingest {' '.join(paths)}{also} --store {self.folder}"

    def native_space(self, fingerprint: str, prefix_sha256: str) -> CacheSpace | None:
        for space in self.spaces():
            if space.model_fingerprint == fingerprint and space.prefix_sha256 == prefix_sha256:
                return space
        return None

    def collect_garbage(self) -> int:
        """Delete cache files no chunk refers to, and temporary files left by a killed run. Only
        files of cag's layout are touched (spaces.walk_caches): anything else is left, with a warning."""
        texts = self.catalog.text_hashes()
        wanted = {s.key: {s.file_key(t) for t in texts} for s in self.spaces()}
        removed = 0
        for entry in walk_caches(self.caches_folder):
            stale = entry.kind == "cache" and entry.space_key in wanted and entry.file_key not in wanted[entry.space_key]
            if stale or entry.kind == "temp":
                entry.path.unlink(missing_ok=True)
                removed += 1
            elif entry.kind == "other":
                log.warning("left alone in store %s: %s is not a cag cache file", self.folder, entry.path)
        for path in self.folder.glob(".tmp-*"):
            if path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def space_files(self, space: CacheSpace) -> list[Path]:
        """The chunk cache files one space holds."""
        return [e.path for e in walk_caches(self.caches_folder, space.key) if e.kind == "cache"]

    def space_usage(self, space: CacheSpace) -> tuple[int, int]:
        """(files, bytes) of one space's chunk caches."""
        files = self.space_files(space)
        return len(files), sum(f.stat().st_size for f in files)

    def remove_space(self, space: CacheSpace) -> tuple[int, int]:
        """Delete one cache space's files (only files of cag's layout): (files, bytes) freed. Hold
        `lock()` around it."""
        usage = self.space_usage(space)
        # cache files first, model.json last: a crash half-way leaves a registered, partly empty
        # space, which ask re-fills (translated) or refuses with the ingest command to run (native)
        entries = list(walk_caches(self.caches_folder, space.key))
        for entry in sorted(entries, key=lambda e: e.kind == "model"):
            if entry.kind in ("cache", "temp", "model"):
                entry.path.unlink(missing_ok=True)
            else:
                log.warning("left alone in store %s: %s is not a cag cache file", self.folder, entry.path)
        folder = self.caches_folder / space.key
        for shard in sorted(folder.glob("[0-9a-f][0-9a-f]")):
            if shard.is_dir() and not shard.is_symlink() and not any(shard.iterdir()):
                shard.rmdir()
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
        return usage

    # ---- index ---------------------------------------------------------------------------
    def index(self) -> VectorIndex:
        """The FAISS index of the catalog as it is now: the one in memory while the catalog has not
        changed since (a long-lived reader, e.g. a server, follows another process's ingest), else
        the saved one, else rebuilt from the catalog (missing, stale after a kill, or damaged)."""
        generation = self.catalog.generation
        if self._index is None or not self.index_is_current(self._index, generation):
            index = load_index(self.folder)
            if index is None or not self.index_is_current(index, generation):
                index = self.rebuild_index()
            self._index = index
        return self._index

    def index_factory(self, n_vectors: int) -> str:
        """The FAISS factory string of this store's index at `n_vectors` vectors (`auto` resolved)."""
        return resolve(self.config.faiss_factory, n_vectors)

    def index_is_current(self, index: VectorIndex, generation: int) -> bool:
        """Built from catalog `generation`, and the kind the store's factory asks for at its size."""
        return index.info.generation == generation and index.info.factory == self.index_factory(index.info.count)

    def rebuild_index(self) -> VectorIndex:
        ids, vectors = self.catalog.embeddings(self.config.embedding_dim)
        try:
            index = VectorIndex.build(self.index_factory(len(ids)), self.config.embedding_dim,
                                      self.config.embedder, ids, vectors, self.catalog.generation)
        except IndexSetupError as exc:
            raise CagError(str(exc)) from exc
        try:
            save_index(self.folder, index)
        except DiskFullError as exc:  # derived data: searched from memory, rebuilt by the next open
            log.warning("the FAISS index of store %s was not saved: %s", self.folder, exc)
        self._index = index
        return index

    def remove_paths(self, paths: list[str]) -> int:
        removed = self.catalog.remove_paths(paths)
        self.rebuild_index()
        self.collect_garbage()
        return removed

    # ---- info ----------------------------------------------------------------------------
    def bytes_on_disk(self) -> int:
        """Bytes of the store's files, caches/ included where it is a link to another disk."""
        linked = self.caches_folder.is_symlink()
        return files_bytes(self.folder) + (files_bytes(self.caches_folder) if linked else 0)

    def info(self) -> dict:
        counts = self.catalog.counts()
        spaces = []
        for space in self.spaces():
            files, size = self.space_usage(space)
            spaces.append({"model": space.model_name, "role": space.role, "files": files, "bytes": size,
                           "fingerprint": space.model_fingerprint[:12]})
        return {"store": str(self.folder), **asdict(self.config), **counts,
                "catalog_integrity": self.catalog.integrity(),
                "bytes_on_disk": self.bytes_on_disk(), "cache_spaces": spaces}
