"""How hard approximate indexes search: lists an IVF index probes, candidates HNSW explores.

FAISS's own defaults (1 list, 16 candidates) lose many true neighbours. On the benchmark's
sentence-embedding-shaped data at 50,000 vectors (`benchmarks/bench_faiss_scale.py`,
`records/faiss_scale.json`, docs/store.md) these give recall@10 0.97 for IVF with auto's list count
(about 4 sqrt(n): 1,024 lists, nprobe 64) and 0.997 for HNSW32; an IVF index with fewer lists
than that needs more of them probed (256 lists: 0.78 at nprobe 16).
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
