"""FAISS search on a GPU, where faiss has GPU support (faiss-gpu) and CUDA finds a device.

The saved index is always the CPU one; for search a copy is moved to GPU 0
(`faiss.index_cpu_to_gpu` with one `StandardGpuResources`). Only index types FAISS has a GPU
version of move (Flat, IVF-Flat, IVF-SQ, IVF-PQ); HNSW and the rest, and every index on a machine
without GPUs (faiss-cpu has no GPU functions), are searched on the CPU.
"""

import logging

import faiss

log = logging.getLogger(__name__)
_GPU_TYPES = tuple(getattr(faiss, name) for name in
                   ("IndexFlat", "IndexIVFFlat", "IndexIVFScalarQuantizer", "IndexIVFPQ"))
_resources = None  # one StandardGpuResources (temporary memory, streams) for every GPU copy


def gpu_count() -> int:
    """GPUs faiss can use: 0 with faiss-cpu, or with faiss-gpu and no CUDA device."""
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


def search_device(index, gpus: int) -> str:
    """"gpu" when there are `gpus` and `index` (under its IndexIDMap2) has a GPU version, else "cpu"."""
    inner = faiss.downcast_index(index.index if isinstance(index, faiss.IndexIDMap) else index)
    return "gpu" if gpus > 0 and isinstance(inner, _GPU_TYPES) else "cpu"


def to_gpu(index):
    """A copy of `index` on GPU 0, or None (search it on the CPU): see `search_device`; a copy the
    GPU refuses (e.g. a PQ layout its kernels lack) is logged and also None."""
    global _resources
    if search_device(index, gpu_count()) != "gpu":
        return None
    try:
        if _resources is None:
            _resources = faiss.StandardGpuResources()
        return faiss.index_cpu_to_gpu(_resources, 0, index)
    except RuntimeError as exc:
        log.warning("FAISS index stays on the CPU: %s", str(exc).strip().splitlines()[-1])
        return None
