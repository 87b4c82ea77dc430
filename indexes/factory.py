"""Which FAISS index a store builds: `--faiss-factory` is a FAISS index_factory string, or `auto`,
which picks by the number of vectors.

`auto`: exact search (`Flat`) up to FLAT_MAX_VECTORS vectors, `HNSW32` above (searched with
`indexes.search_effort.EF_SEARCH`). Why: benchmarks/bench_faiss_scale.py, records/faiss_scale.json
and docs/store.md ("The vector index"). At 1,000,000 sentence-embedding-shaped vectors Flat still
answers a query in 158 ms of one core and exactly, while every approximate index lost true
neighbours at a useful speed (IVF needed half its lists probed for recall@10 0.95, 2.3 times
faster than Flat); above that HNSW32 searches in milliseconds at recall@10 0.89.
"""

from indexes.faiss_index import IndexSetupError, new_index

AUTO = "auto"
FLAT_MAX_VECTORS = 1_000_000
LARGE_FACTORY = "HNSW32"


def factory_for(n_vectors: int) -> str:
    """The factory `auto` builds for an index of `n_vectors` vectors."""
    return "Flat" if n_vectors <= FLAT_MAX_VECTORS else LARGE_FACTORY


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
