"""The prefill actor: one model on one Ray worker, chunk caches written straight into the store.

Cache files are content-addressed (CacheSpace.file_key) and written atomically (temporary file,
fsync, rename), so workers write them without coordination: two that write the same key write the
same cache. A worker touches nothing else in the store; the driver commits the catalog and index.
"""

from dataclasses import dataclass

import torch

from cag.errors import CagError
from cag.faults import fault_point
from cag.kv.chunk_cache import ids_sha256, prefill_chunks
from cag.kv.serde import save_chunk_cache
from cag.models import load_model
from cag.prompt import prompt_layout
from cag.store.spaces import CacheSpace
from cag.store.store import Store


@dataclass(frozen=True)
class PrefillSpec:
    """What a prefill worker loads and where it writes."""

    model: str  # as the user named it (an alias, a folder on every node, a hub id)
    dtype: str
    device: str  # "cpu" or "cuda" (the GPU Ray gave it)
    threads: int
    store: str  # the store folder, at the same path on every node
    space: CacheSpace  # the space the driver registered: the worker's model must be that one
    batch_size: int


def _node() -> str:
    import socket
    return socket.gethostname()


class PrefillWorker:
    """Made a Ray actor by `cluster.start_actors`; a plain class here (tests call it directly)."""

    def __init__(self, spec: PrefillSpec):
        self.spec, self._problem = spec, None
        try:
            torch.set_num_threads(spec.threads)
            self.lm = load_model(spec.model, spec.dtype, spec.device)
            self.prefix = tuple(prompt_layout(self.lm.tokenizer).prefix_ids)
            self._check_model()
            self.store = self._open_store()
        except CagError as exc:
            self._problem = f"Ray worker on {_node()}: {exc}"
        except Exception as exc:  # a worker that cannot start says why, once, on the driver
            self._problem = f"Ray worker on {_node()}: {type(exc).__name__}: {exc}"

    def _check_model(self) -> None:
        space = self.spec.space
        if self.lm.fingerprint != space.model_fingerprint or ids_sha256(self.prefix) != space.prefix_sha256:
            raise CagError(f"{self.spec.model} here is {self.lm.fingerprint[:12]}, on the driver "
                           f"{space.model_fingerprint[:12]}: give every node the same model files (convert "
                           "packaged models on each node, or share $CAG_HOME).")

    def _open_store(self) -> Store:
        try:
            return Store.open(self.spec.store, catalog=False)
        except CagError as exc:
            raise CagError(f"the store folder {self.spec.store} is not usable here ({exc}): put the store on "
                           "a file system every node mounts at the same path.") from exc

    def problem(self) -> str | None:
        """Why this worker cannot prefill (None: it is ready)."""
        return self._problem

    def prefill(self, items: list) -> list:
        """Prefill (text, document label, chunk index) items as one batch, as the local ingest does,
        and write their caches; [(text sha256, tokens)]."""
        if self._problem:
            raise CagError(self._problem)
        texts, docs, indices = (list(column) for column in zip(*items))
        caches = prefill_chunks(self.lm, texts, self.prefix, batch_size=self.spec.batch_size,
                                doc_ids=docs, chunk_indices=indices)
        done = []
        for cache in caches:
            save_chunk_cache(cache, self.store.cache_path(self.spec.space, cache.meta.text_sha256),
                             self.store.config.cache_dtype)
            fault_point("cache_written")
            done.append((cache.meta.text_sha256, cache.num_tokens))
        return done
