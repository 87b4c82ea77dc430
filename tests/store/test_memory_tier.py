"""The memory tier: decoded chunk caches by key, least recently used out past a byte size, and the
store's reads served from it."""

import torch

from cag.ingest.pipeline import IngestOptions, ingest
from cag.kv.chunk_cache import ChunkCache
from cag.store import Store
from cag.store.memory_tier import MemoryTier, cache_bytes


def _cache(tokens: int) -> ChunkCache:
    layer = torch.zeros(2, tokens, 4, dtype=torch.float16)  # (kv_heads, T, head_dim): 16 bytes per token
    return ChunkCache([layer], [layer.clone()], torch.zeros(tokens, dtype=torch.int64),
                      torch.zeros(tokens, 2, dtype=torch.int64), None, "")


def test_least_recently_used_out_past_the_size():
    a, b, c = _cache(10), _cache(10), _cache(10)
    size = cache_bytes(a)
    assert size == 10 * (16 + 16 + 8 + 16)
    tier = MemoryTier(2 * size)
    tier.put("a", a)
    tier.put("b", b)
    assert tier.get("a") is a  # a is now the most recent
    tier.put("c", c)  # b goes
    assert tier.get("b") is None and tier.get("a") is a and tier.get("c") is c
    stats = tier.stats()
    assert (stats.hits, stats.misses, stats.evictions, stats.entries, stats.bytes) == (3, 1, 1, 2, 2 * size)
    tier.put("big", _cache(100))  # larger than the whole tier: not kept, nothing evicted
    assert tier.get("big") is None and tier.stats().entries == 2


def test_the_store_reads_a_cache_once_then_from_memory(tiny_models, tmp_path, monkeypatch):
    import cag.store.store as store_module

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The harbour master logged forty ships in March.")
    ingest([folder], tmp_path / "store", IngestOptions(encoder=tiny_models["encoder"]))
    store = Store.open(tmp_path / "store")
    store.memory = MemoryTier(2**20)
    row, space = store.catalog.all_chunks()[0], store.spaces()[0]
    reads = []
    real = store_module.load_chunk_cache
    monkeypatch.setattr(store_module, "load_chunk_cache", lambda path: reads.append(path) or real(path))
    first = store.read_cache(space, row)
    assert store.read_cache(space, row) is first and len(reads) == 1
    assert store.memory.stats().hits == 1
