"""Models kept loaded behind one queue each.

Every loaded model has one worker thread that runs the jobs submitted for it in arrival order, so
two forward passes never run on one model at once and a request waits in line, timed (`queue_ms`).
The worker loads its model (and warms it) as its first act; the pool keeps at most `max_loaded`
workers and retires the least recently used past it (it finishes the jobs already queued, then
drops its model). A worker also owns its handle on the main store (SQLite connections stay in the
thread that opened them); the sentence embedder is shared, behind a lock (a fast tokenizer must not
be called from two threads at once).
"""

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from cag.errors import CagError
from cag.kv.assemble import warm_up
from cag.models import LoadedModel, load_model
from cag.modes import modes
from cag.prompt import prompt_layout
from cag.retrieval import Retriever
from cag.server.errors import UnknownModelError
from cag.store.memory_tier import MemoryTier
from cag.store.store import Store

log = logging.getLogger(__name__)


class LockedEmbedder:
    """An Embedder shared by threads: one `encode` at a time."""

    def __init__(self, embedder):
        self._embedder, self._lock = embedder, threading.Lock()
        self.name, self.dim = embedder.name, embedder.dim

    def encode(self, texts: list[str], batch_size: int = 32):
        with self._lock:
            return self._embedder.encode(texts, batch_size)


@dataclass
class WorkerContext:
    """What a job gets: the loaded model and, opened in the worker's thread, the main store."""

    lm: LoadedModel
    store_dir: Path
    embedder: LockedEmbedder
    memory: MemoryTier | None = None  # shared by every worker's store handle
    _retriever: Retriever | None = field(default=None, repr=False)

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            store = Store.open(self.store_dir)
            store.memory = self.memory
            self._retriever = Retriever(store, self.embedder)
        return self._retriever

    def close(self) -> None:
        if self._retriever is not None:
            self._retriever.store.close()


@dataclass
class Ran:
    """A job's value and how long it waited in its model's queue."""

    value: object
    queue_ms: float


@dataclass
class _Job:
    fn: Callable
    future: Future
    enqueued: float


class ModelWorker:
    """One model's queue and the thread that serves it."""

    def __init__(self, name: str, load: Callable[[str], WorkerContext], on_failed: Callable):
        self.name = name
        self._load, self._on_failed = load, on_failed
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.loaded = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cag-model-{Path(name).name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[WorkerContext], object]) -> Future:
        future: Future = Future()
        self._queue.put(_Job(fn, future, time.perf_counter()))
        return future

    def stop(self) -> None:
        """Serve what is queued, then drop the model."""
        self._queue.put(None)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            context = self._load(self.name)
        except BaseException as exc:  # noqa: BLE001 - every queued request must hear why
            log.warning("could not load %s: %s", self.name, exc)
            self._on_failed(self)
            self._fail_all(exc)
            return
        self.loaded.set()
        try:
            while (job := self._queue.get()) is not None:
                if job.future.set_running_or_notify_cancel():
                    waited = (time.perf_counter() - job.enqueued) * 1e3
                    try:
                        job.future.set_result(Ran(job.fn(context), waited))
                    except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
                        job.future.set_exception(exc)
        finally:
            context.close()
            log.info("unloaded %s", self.name)

    def _fail_all(self, exc: BaseException) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None and job.future.set_running_or_notify_cancel():
                job.future.set_exception(exc)


class ModelPool:
    """The models a server may use (`allowed`), at most `max_loaded` of them loaded at once."""

    def __init__(self, allowed: list[str], max_loaded: int, store_dir: Path, embedder: LockedEmbedder,
                 device: str = "auto", dtype: str = "auto", memory: MemoryTier | None = None):
        self.allowed = list(dict.fromkeys(allowed))
        self.max_loaded, self.store_dir, self.embedder = max_loaded, Path(store_dir), embedder
        self.device, self.dtype, self.memory = device, dtype, memory
        self._workers: OrderedDict[str, ModelWorker] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def check_model(self, name: str) -> str:
        if name not in self.allowed:
            raise UnknownModelError(f"Unknown model {name!r}: this server serves {', '.join(self.allowed)} "
                                    "(start it with --models to serve others).")
        return name

    def loaded(self) -> list[str]:
        with self._lock:
            return [name for name, w in self._workers.items() if w.loaded.is_set()]

    def submit(self, name: str, fn: Callable[[WorkerContext], object]) -> Future:
        """Queue `fn(context)` on `name`'s worker (loading it first if needed): a Future of `Ran`."""
        self.check_model(name)
        with self._lock:
            worker = self._workers.get(name)
            if worker is None:
                worker = self._workers[name] = ModelWorker(name, self._load_context, self._forget)
                while len(self._workers) > self.max_loaded:
                    _, retired = self._workers.popitem(last=False)
                    log.info("unloading %s (least recently used; --max-loaded %d)", retired.name, self.max_loaded)
                    retired.stop()
            self._workers.move_to_end(name)
            return worker.submit(fn)

    def run(self, name: str, fn: Callable[[WorkerContext], object]) -> Ran:
        """`submit` and wait."""
        return self.submit(name, fn).result()

    def warm(self, names: list[str]) -> None:
        """Load (and warm) `names` now, in order; a model that fails to load raises its error."""
        for name in names:
            self.run(name, lambda context: None)

    def close(self) -> None:
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.join(timeout=30)

    def _forget(self, worker: ModelWorker) -> None:
        with self._lock:
            if self._workers.get(worker.name) is worker:
                del self._workers[worker.name]

    def _load_context(self, name: str) -> WorkerContext:
        start = time.perf_counter()
        lm = load_model(name, self.dtype, self.device)
        context = WorkerContext(lm, self.store_dir, self.embedder, self.memory)
        warm_up(lm, prompt_layout(lm.tokenizer).prefix_ids)
        context.retriever.warm_up()
        for mode in modes():  # load the translators from the store's encoder to this model, if any
            if mode.translator_kind:
                try:
                    mode.prepare(context.retriever.store, lm)
                except CagError:
                    pass
        log.info("%s loaded and warm in %.1f s", name, time.perf_counter() - start)
        return context
