"""The prefill actor: one model on one Ray worker, chunk caches written straight into the store.

Cache files are content-addressed (CacheSpace.file_key) and written atomically (temporary file,
fsync, rename), so workers write them without coordination: two that write the same key write the
same cache. A worker touches nothing else in the store; the driver commits the catalog and index.
"""

from dataclasses import dataclass

from cag.distributed.worker import ModelWorker, WorkerSpec
from cag.errors import CagError
from cag.faults import fault_point
from cag.kv.chunk_cache import ids_sha256, prefill_chunks
from cag.kv.serde import save_chunk_cache
from cag.store.spaces import CacheSpace


@dataclass(frozen=True)
class PrefillSpec(WorkerSpec):
    """What a prefill worker loads and where it writes."""

    space: CacheSpace = None  # the space the driver registered: the worker's model must be that one
    batch_size: int = 8


class PrefillWorker(ModelWorker):
    """Prefills chunks with its model and writes their caches into the store."""

    def check_model(self) -> None:
        space = self.spec.space
        self.refuse_other_model(space.model_fingerprint)
        if ids_sha256(self.layout.prefix_ids) != space.prefix_sha256:
            raise CagError(f"{self.spec.model} here reads another prompt prefix than on the driver: give every node "
                           "the same model files.")

    def prefill(self, items: list) -> list:
        """Prefill (text, document label, chunk index) items as one batch, as the local ingest does,
        and write their caches; [(text sha256, tokens)]."""
        self.ready()
        texts, docs, indices = (list(column) for column in zip(*items))
        caches = prefill_chunks(self.lm, texts, self.layout.prefix_ids, batch_size=self.spec.batch_size,
                                doc_ids=docs, chunk_indices=indices)
        done = []
        for cache in caches:
            save_chunk_cache(cache, self.store.cache_path(self.spec.space, cache.meta.text_sha256),
                             self.store.config.cache_dtype)
            fault_point("cache_written")
            done.append((cache.meta.text_sha256, cache.num_tokens))
        return done
