"""A memory tier of decoded chunk caches (`cag serve --memory-tier-mb`): a hot chunk skips the disk,
the checksum, the decode and, for a stored translation, the translation. Least recently used out
past a size in bytes; shared by the server's model threads, behind a lock.

What it holds was verified when read from disk; callers never write into a chunk cache's tensors
(assembly concatenates them into new ones), so the same objects serve every reader.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass

from cag.kv.chunk_cache import ChunkCache


def cache_bytes(cache: ChunkCache) -> int:
    """Bytes held by one decoded chunk cache's tensors."""
    tensors = list(cache.keys) + list(cache.values) + [cache.token_ids, cache.offsets]
    return sum(t.numel() * t.element_size() for t in tensors)


@dataclass
class TierStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0
    max_bytes: int = 0


class MemoryTier:
    """Decoded chunk caches by key ((space key, text sha256)), at most `max_bytes` of them; a cache
    larger than the whole tier is not kept."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()  # key -> (cache, bytes), least recent first
        self._lock = threading.Lock()
        self._stats = TierStats(max_bytes=max_bytes)

    def get(self, key) -> ChunkCache | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self._stats.misses += 1
                return None
            self._items.move_to_end(key)
            self._stats.hits += 1
            return item[0]

    def put(self, key, cache: ChunkCache) -> None:
        size = cache_bytes(cache)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return
            self._items[key] = (cache, size)
            self._stats.bytes += size
            while self._stats.bytes > self.max_bytes:
                _, (_, freed) = self._items.popitem(last=False)
                self._stats.bytes -= freed
                self._stats.evictions += 1
            self._stats.entries = len(self._items)

    def stats(self) -> TierStats:
        with self._lock:
            return TierStats(**vars(self._stats))
