"""How hard approximate indexes search: lists an IVF index probes, candidates HNSW explores.

FAISS's own defaults (1 list, 16 candidates) lose many true neighbours. These settings reach
recall@10 >= 0.95 against exact search on the benchmark's sentence-embedding-shaped data
(`benchmarks/bench_faiss_scale.py`, `records/faiss_scale.json`, docs/store.md).
"""

import faiss

EF_SEARCH = 64  # HNSW candidates explored per query


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
