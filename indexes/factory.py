"""Which FAISS index a store builds: `--faiss-factory` is a FAISS index_factory string, or `auto`,
which picks by the number of vectors.

`auto`: exact search (`Flat`) up to FLAT_MAX_VECTORS vectors; above, an inverted file with about
4 sqrt(n) lists (`IVF<lists>,Flat`, full vectors, so no quantization loss), searched with the
`indexes.search_effort` defaults. Why these: benchmarks/bench_faiss_scale.py,
records/faiss_scale.json and docs/store.md ("The vector index"): Flat's query time grows with n,
an IVF index's build time (k-means on a fixed sample, then one assignment per vector) stays a
small share of an ingest, while HNSW builds far more slowly, and the store rebuilds its index
after every ingest that changes the catalog.
"""

import math

from indexes.faiss_index import IndexSetupError, new_index

AUTO = "auto"
FLAT_MAX_VECTORS = 100_000


def ivf_lists(n_vectors: int) -> int:
    """About 4 sqrt(n) lists, a power of two (so small changes in n keep the same index kind), and
    no more than n / 39 (FAISS's k-means wants 39 training vectors per list)."""
    lists = min(4 * math.sqrt(n_vectors), n_vectors / 39)
    return 1 << max(0, round(math.log2(max(1.0, lists))))


def factory_for(n_vectors: int) -> str:
    """The factory `auto` builds for an index of `n_vectors` vectors."""
    return "Flat" if n_vectors <= FLAT_MAX_VECTORS else f"IVF{ivf_lists(n_vectors)},Flat"


def resolve(factory: str, n_vectors: int) -> str:
    """The FAISS factory string to build: `factory` itself, or `auto`'s choice for `n_vectors`."""
    return factory_for(n_vectors) if factory == AUTO else factory


def check_factory(factory: str, dim: int) -> None:
    """IndexSetupError (one line, naming the string) unless `factory` is `auto` or a FAISS
    index_factory string FAISS builds for `dim`-dimensional vectors."""
    if factory != AUTO:
        if not factory or factory != factory.strip():
            raise IndexSetupError(f"Invalid FAISS factory string {factory!r}: use auto, Flat, IVF<lists>,Flat, "
                                  "HNSW32 or another FAISS index_factory string.")
        new_index(factory, dim)
