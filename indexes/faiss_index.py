"""A FAISS index over int64 chunk ids.

The factory string (`"Flat"`, `"IVF256,Flat"`, `"HNSW32"`) is the index's saved config; ids are
explicit (`IndexIDMap2`) so that deletions work; vectors are unit-norm float32 `[n, dim]` searched
by inner product. Trainable indexes train on a fixed sample of the vectors (`train_sample`). IVF
indexes probe, and HNSW indexes explore, what `indexes.search_effort` sets (FAISS's own defaults, 1
list and 16 candidates, lose neighbours). Where faiss has GPUs, search runs on a GPU copy
(`indexes.gpu`). This package knows nothing of cag: where the bytes go (and their digest) is the
store's business (`to_bytes` / `from_bytes`).
"""

import logging
import time
from dataclasses import asdict, dataclass

import faiss
import numpy as np

from indexes.gpu import to_gpu
from indexes.search_effort import default_search_params

log = logging.getLogger(__name__)
TRAIN_POINTS_PER_LIST = 64  # IVF training sample: this many vectors per list ...
MIN_TRAIN_POINTS = 65_536  # ... and at least this many (PQ codebooks, scalar quantizer ranges)


class IndexSetupError(ValueError):
    """A factory string FAISS does not know, or an index that cannot be trained on what it got."""


@dataclass(frozen=True)
class IndexInfo:
    factory: str
    dim: int
    embedder: str
    count: int
    generation: int  # the catalog generation the index was built from


@dataclass(frozen=True)
class BuildStats:
    """How one build went: seconds training (0 for Flat and HNSW) and adding."""

    train_s: float
    add_s: float
    train_vectors: int


def new_index(factory: str, dim: int):
    """An empty IndexIDMap2 over `factory`; IndexSetupError naming the string when FAISS refuses it."""
    try:
        inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise IndexSetupError(f"Invalid FAISS factory string {factory!r} for {dim}-d vectors "
                              f"({_last_line(exc)}): use auto, Flat, IVF<lists>,Flat, HNSW32 or another "
                              "FAISS index_factory string.") from exc
    ivf = faiss.downcast_index(inner)
    if isinstance(ivf, faiss.IndexIVFPQ):  # polysemous codes serve Hamming pre-filters we do not
        ivf.do_polysemous_training = False  # use, and training them is most of an IVF-PQ build
    return faiss.IndexIDMap2(inner)


def train_sample(vectors: np.ndarray, index) -> np.ndarray:
    """The vectors an index trains on: all of them, or a fixed random sample of
    max(TRAIN_POINTS_PER_LIST * lists, MIN_TRAIN_POINTS) (k-means cost grows with the sample)."""
    try:
        lists = faiss.extract_index_ivf(index).nlist
    except RuntimeError:  # not an IVF index
        lists = 0
    size = max(TRAIN_POINTS_PER_LIST * lists, MIN_TRAIN_POINTS)
    if len(vectors) <= size:
        return vectors
    picked = np.sort(np.random.default_rng(0).choice(len(vectors), size, replace=False))
    return vectors[picked]


def set_search_params(index, params: dict) -> None:
    """Set FAISS search parameters (`nprobe`, `efSearch`) on `index` (through its IndexIDMap2)."""
    space = faiss.ParameterSpace()
    for name, value in params.items():
        space.set_index_parameter(index, name, value)


class VectorIndex:
    def __init__(self, index, info: IndexInfo, gpu: bool = True, build_stats: BuildStats | None = None):
        self.index = index
        self.info = info
        self.gpu = gpu  # search on GPUs where present
        self.build_stats = build_stats
        self._searcher = None
        self.search_params = default_search_params(index)
        set_search_params(index, self.search_params)

    @classmethod
    def build(cls, factory: str, dim: int, embedder: str, ids: np.ndarray, vectors: np.ndarray,
              generation: int, gpu: bool = True) -> "VectorIndex":
        """Build from `ids` (n,) int64 and `vectors` (n, dim) float32, training if needed (on the
        CPU); `gpu=False` keeps its searches off GPUs."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dim)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        index = new_index(factory, dim)
        start = time.perf_counter()
        sample = vectors[:0]
        if not index.is_trained:
            if len(ids) == 0:
                raise IndexSetupError(f"FAISS index {factory!r} needs training vectors; ingest documents first.")
            sample = train_sample(vectors, index)
            try:
                index.train(sample)
            except RuntimeError as exc:
                raise IndexSetupError(f"Could not train FAISS index {factory!r} on {len(sample)} vectors "
                                      f"({_last_line(exc)}); use auto, Flat or fewer IVF lists.") from exc
        trained = time.perf_counter()
        if len(ids):
            index.add_with_ids(vectors, ids)
        stats = BuildStats(trained - start, time.perf_counter() - trained, len(sample))
        return cls(index, IndexInfo(factory, dim, embedder, int(index.ntotal), generation), gpu, stats)

    def remove(self, ids: np.ndarray) -> int:
        removed = self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64))
        self.info = IndexInfo(**{**asdict(self.info), "count": int(self.index.ntotal)})
        self._searcher = None
        return int(removed)

    def set_search(self, **params) -> None:
        """Override search parameters (`nprobe=`, `efSearch=`), e.g. to trade recall for speed."""
        set_search_params(self.index, params)
        self.search_params = {**self.search_params, **params}
        self._searcher = None

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores (q, k), ids (q, k)); missing results have id -1."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.info.dim)
        return self._search_index().search(queries, k)

    def _search_index(self):
        if self._searcher is None:
            self._searcher = (to_gpu(self.index) if self.gpu else None) or self.index
        return self._searcher

    def ids(self) -> np.ndarray:
        """(n,) int64: every id the index holds."""
        return faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def to_bytes(self) -> bytes:
        return faiss.serialize_index(self.index).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, info: IndexInfo) -> "VectorIndex":
        """The index `to_bytes` wrote; ValueError when the bytes are not one, or not the one `info`
        describes (another vector count or dimension)."""
        try:
            index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        except RuntimeError as exc:
            raise ValueError(f"not a readable FAISS index ({_last_line(exc)})") from exc
        if index.ntotal != info.count or index.d != info.dim:
            raise ValueError(f"holds {index.ntotal} vectors of {index.d} dimensions, its sidecar says "
                             f"{info.count} of {info.dim}")
        return cls(index, info)


def _last_line(exc: Exception) -> str:
    """FAISS's C++ errors span lines (file, line, condition); the last one says what is wrong."""
    return str(exc).strip().splitlines()[-1]
