"""How hard approximate indexes search: lists an IVF index probes, candidates HNSW explores.

FAISS's own defaults (1 list, 16 candidates) lose many true neighbours. On the benchmark's
sentence-embedding-shaped data (`benchmarks/bench_faiss_scale.py`, `records/faiss_scale.json`,
docs/store.md), recall@10 against exact search: HNSW32 0.997 at 50,000 vectors with 64
candidates, but at 1,000,000 0.71 with 64 and 0.89 with 512 (5.7 ms a query on one core): so 512.
IVF with 1,024 lists: 0.97 at nprobe 64 at 50,000, 0.66 at 1,000,000 (there half the lists are
needed for 0.97); an IVF index is only built when asked for by name, and probes 1/16 of its lists.
"""

import faiss

EF_SEARCH = 512  # HNSW candidates explored per query


def nprobe_for(nlist: int) -> int:
    """IVF lists probed per query for an index of `nlist` lists."""
    return min(nlist, max(16, nlist // 16))


def default_search_params(index) -> dict:
    """{"nprobe": ...} for an IVF index, {"efSearch": ...} for HNSW, {} for exact ones."""
    try:
        return {"nprobe": nprobe_for(faiss.extract_index_ivf(index).nlist)}
    except RuntimeError:  # not an IVF index
        pass
    inner = faiss.downcast_index(index.index if hasattr(index, "id_map") else index)
    return {"efSearch": EF_SEARCH} if hasattr(inner, "hnsw") else {}
