"""Retrieve the chunks closest to a question from a store's FAISS index."""

import logging
import time
from dataclasses import dataclass

from cag.errors import CagError
from cag.store.catalog import ChunkRow
from cag.store.store import Store
from indexes.embedder import Embedder, EmbedderLoadError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retrieved:
    chunk: ChunkRow
    score: float  # cosine similarity of question and chunk embeddings


@dataclass
class Retrieval:
    results: list  # [Retrieved], best first
    embed_ms: float
    retrieve_ms: float
    clamped_from: int | None = None  # the top-k asked, when it exceeded the chunk count


def load_embedder(name: str) -> Embedder:
    """The sentence-transformers model `name`; a load failure is a one-line CagError."""
    try:
        return Embedder(name)
    except EmbedderLoadError as exc:
        raise CagError(str(exc)) from exc


class Retriever:
    def __init__(self, store: Store, embedder: Embedder | None = None):
        self.store = store
        if embedder is not None:
            store.check_embedder(embedder.name)
        self._embedder = embedder
        self._embedder_warm = False

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: `--mode none` never needs it."""
        if self._embedder is None:
            self._embedder = load_embedder(self.store.config.embedder)
        return self._embedder

    def warm_up(self) -> None:
        """Pay the one-time costs before questions are timed: the embedder loaded and run once,
        the index read (or rebuilt). The embedder runs once per retriever; the index is checked each
        time (another process's ingest may have changed the catalog)."""
        if not self._embedder_warm:
            self.embedder.encode(["warm-up"])
            self._embedder_warm = True
        self.store.index()

    def retrieve(self, question: str, top_k: int) -> Retrieval:
        if top_k < 1:
            raise CagError(f"--top-k must be at least 1 (got {top_k}).")
        total = self.store.catalog.counts()["chunks"]
        if total == 0:
            raise CagError(f"Store {self.store.folder} is empty: ingest documents first.")
        clamped = None
        if top_k > total:
            log.info("--top-k %d is more than the %d chunks in the store; using %d", top_k, total, total)
            clamped, top_k = top_k, total
        start = time.perf_counter()
        vector = self.embedder.encode([question])
        embedded = time.perf_counter()
        scores, ids = self.store.index().search(vector, top_k)
        rows = self.store.catalog.chunks_by_id([int(i) for i in ids[0] if i >= 0])
        results = [Retrieved(rows[int(i)], float(s)) for s, i in zip(scores[0], ids[0]) if int(i) in rows]
        done = time.perf_counter()
        return Retrieval(results, (embedded - start) * 1e3, (done - embedded) * 1e3, clamped)
