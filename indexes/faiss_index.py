"""A FAISS index over int64 chunk ids.

The factory string (`"Flat"`, `"IVF256,Flat"`, `"HNSW32"`) is the index's saved config; ids are
explicit (`IndexIDMap2`) so that deletions work; vectors are unit-norm float32 `[n, dim]` searched
by inner product. IVF indexes probe up to 16 lists. faiss-gpu is used for search when GPUs are
present. This package knows nothing of cag: where the bytes go (and their digest) is the store's
business (`to_bytes` / `from_bytes`).
"""

import logging
from dataclasses import asdict, dataclass

import faiss
import numpy as np

log = logging.getLogger(__name__)


class IndexSetupError(ValueError):
    """A factory string FAISS does not know, or an index that cannot be trained on what it got."""


@dataclass(frozen=True)
class IndexInfo:
    factory: str
    dim: int
    embedder: str
    count: int
    generation: int  # the catalog generation the index was built from


def _new_index(factory: str, dim: int):
    try:
        inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise IndexSetupError(f"Invalid FAISS factory string {factory!r}: {exc}") from exc
    return faiss.IndexIDMap2(inner)


def _default_nprobe(index, lists_probed: int = 16) -> None:
    """IVF indexes search 1 list by default (poor recall): probe up to 16 lists."""
    try:
        ivf = faiss.extract_index_ivf(index)
    except RuntimeError:  # not an IVF index
        return
    ivf.nprobe = min(ivf.nlist, lists_probed)


class VectorIndex:
    def __init__(self, index, info: IndexInfo):
        self.index = index
        self.info = info
        self._searcher = None
        _default_nprobe(index)

    @classmethod
    def build(cls, factory: str, dim: int, embedder: str, ids: np.ndarray, vectors: np.ndarray,
              generation: int) -> "VectorIndex":
        """Build from `ids` (n,) int64 and `vectors` (n, dim) float32, training if needed."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dim)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        index = _new_index(factory, dim)
        if not index.is_trained:
            if len(ids) == 0:
                raise IndexSetupError(f"FAISS index {factory!r} needs training vectors; ingest documents first.")
            try:
                index.train(vectors)
            except RuntimeError as exc:
                raise IndexSetupError(f"Could not train FAISS index {factory!r} on {len(ids)} vectors "
                                      f"({exc}); use 'Flat' or fewer IVF lists for a small store.") from exc
        if len(ids):
            index.add_with_ids(vectors, ids)
        return cls(index, IndexInfo(factory, dim, embedder, int(index.ntotal), generation))

    def remove(self, ids: np.ndarray) -> int:
        removed = self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64))
        self.info = IndexInfo(**{**asdict(self.info), "count": int(self.index.ntotal)})
        self._searcher = None
        return int(removed)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores (q, k), ids (q, k)); missing results have id -1."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.info.dim)
        return self._search_index().search(queries, k)

    def _search_index(self):
        if self._searcher is None:
            self._searcher = self.index
            if hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0:
                self._searcher = faiss.index_cpu_to_all_gpus(self.index)
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
            raise ValueError(f"not a readable FAISS index ({str(exc).splitlines()[0]})") from exc
        if index.ntotal != info.count or index.d != info.dim:
            raise ValueError(f"holds {index.ntotal} vectors of {index.d} dimensions, its sidecar says "
                             f"{info.count} of {info.dim}")
        return cls(index, info)
