"""`cag ingest --ray`: the driver. It diffs the catalog, chunks, assigns prefill batches to Ray actors
(each holds one model and writes its caches straight into the store folder), embeds, and alone
commits the catalog (one transaction per file, in file order) and the FAISS index.

The batches are the local ingest's (per file and model, `batch_size` chunks, identical texts once),
so a Ray store holds the same rows and cache files as a local one. Killed workers are restarted and
their batch retried (or re-assigned); a killed driver is resumed by running the command again:
committed files are unchanged, caches already written are kept.
"""

import logging
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from cag.distributed.cluster import connect, plan_workers, start_actors
from cag.distributed.dispatch import Dispatcher
from cag.distributed.options import RayOptions
from cag.distributed.prefill import PrefillSpec, PrefillWorker
from cag.ingest.chunking import Chunker
from cag.ingest.pipeline import (FILES_TASK, PREFILL_TASK, FilePlan, IngestOptions, IngestReport,
                                 check_existing_store, check_paths, chunks_to_prefill, commit_file,
                                 embed_plan, finish_ingest, ingest_spaces, plan_file, reuse_stores,
                                 store_config)
from cag.ingest.reading import discover
from cag.models.loading import model_identity
from cag.progress import Progress
from cag.retrieval import load_embedder
from cag.store.catalog import doc_label
from cag.store.store import Store, check_faiss_factory

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _File:
    """A file in commit order: its plan (None: unchanged or skipped) and its batches still running."""

    plan: FilePlan | None
    running: int = 0
    vectors: object = None  # its embeddings, computed while workers prefill


def ray_ingest(paths: list, store_dir: Path | None = None, options: IngestOptions = IngestOptions(),
               ray_options: RayOptions = RayOptions(), progress: Progress | None = None) -> IngestReport:
    """`cag.ingest.pipeline.ingest` with the prefill spread over a Ray cluster's workers."""
    start = time.perf_counter()
    progress = progress or Progress()
    roots = check_paths(paths)
    check_existing_store(store_dir, options)
    with connect(ray_options) as cluster:  # first: a wrong address fails before any other work
        encoder = model_identity(options.encoder)  # tokenizer and fingerprint: the workers hold the model
        embedder = load_embedder(options.embedder)
        if options.faiss_factory is not None:
            check_faiss_factory(options.faiss_factory, embedder.dim)
        store = Store.open_or_create(store_dir, store_config(encoder, embedder, options))
        try:
            with store.lock():
                if options.faiss_factory is not None:
                    store.set_faiss_factory(options.faiss_factory)
                report = _ingest(roots, store, encoder, embedder, options, ray_options, cluster, progress)
        finally:
            store.close()
    report.seconds = time.perf_counter() - start
    return report


def _ingest(roots, store, encoder, embedder, options, ray_options, cluster, progress) -> IngestReport:
    models = {encoder.fingerprint: (options.encoder, options.dtype)}
    also = []
    for name in options.also_for:
        identity = model_identity(name)
        also.append(identity)
        models.setdefault(identity.fingerprint, (name, options.also_for_dtype or options.dtype))
    spaces = ingest_spaces(encoder, also, options)
    for s in spaces:
        store.register_space(s.space)
    donors = reuse_stores(options.reuse_from, store)
    batch_size = max(1, options.batch_size)
    plan = plan_workers(cluster, len(spaces), ray_options, options.device)
    dispatcher = Dispatcher()

    def start_workers() -> None:
        """Every model's workers, started when the first batch is queued (none for a store that is
        up to date)."""
        log.info("%d Ray worker(s) per model on %s, %d model(s)", plan.per_model, plan.device, len(spaces))
        for s in spaces:
            name, dtype = models[s.space.model_fingerprint]
            spec = PrefillSpec(name, dtype, plan.device, plan.num_cpus, str(store.folder.resolve()),
                               s.space, batch_size)
            dispatcher.add_pool(s.space.key, start_actors(PrefillWorker, plan, spec))

    try:
        return _run(roots, store, encoder, embedder, spaces, donors, batch_size, dispatcher, start_workers,
                    progress)
    finally:
        dispatcher.stop()


def _run(roots, store, encoder, embedder, spaces, donors, batch_size, dispatcher, start_workers,
         progress) -> IngestReport:
    config = store.config
    chunker = Chunker(encoder.tokenizer, config.chunk_tokens, config.chunk_overlap)
    report = IngestReport(str(store.folder))
    files = discover(roots)
    report.files_seen = len(files)
    progress.start(FILES_TASK, len(files))
    progress.start(PREFILL_TASK)
    taken = {s.space.key: set() for s in spaces}  # texts whose cache is written or being written

    def has_cache(space, text):
        return text in taken[space.key] or store.cache_path(space, text).is_file()

    order, upcoming = deque(), iter(files)
    more = True
    while more or order:
        while more and dispatcher.outstanding < 2 * max(dispatcher.capacity, 1):
            path = next(upcoming, None)
            if path is None:
                more = False
                break
            entry = _File(plan_file(path, store, chunker, spaces, report, has_cache))
            if entry.plan is not None:
                _assign(entry, store, spaces, taken, donors, batch_size, dispatcher, report, progress)
            if entry.running and not dispatcher.pools:
                start_workers()
            order.append(entry)
        while order and order[0].running == 0:
            entry = order.popleft()
            if entry.plan is not None:
                commit_file(store, entry.plan, embedder, encoder.tokenizer, report, entry.vectors)
            progress.advance(FILES_TASK)
        waiting = next((e for e in order if e.plan is not None and e.vectors is None), None)
        if waiting is not None and dispatcher.in_flight:
            waiting.vectors = embed_plan(embedder, waiting.plan)  # while the workers prefill
            continue
        if order:
            _collect(dispatcher, report, progress)
    finish_ingest(store, roots, files, report)
    return report


def _assign(entry: _File, store, spaces, taken, donors, batch_size, dispatcher, report, progress) -> None:
    """Queue the file's missing caches, per model in batches of `batch_size`, as the local ingest
    prefills them."""
    for s in spaces:
        todo = chunks_to_prefill(store, s.space, entry.plan.pending, report, donors, taken[s.space.key])
        progress.grow(PREFILL_TASK, len(todo))
        for start in range(0, len(todo), batch_size):
            items = [(c.text, doc_label(d.path, d.locator), c.idx) for d, c in todo[start:start + batch_size]]
            dispatcher.submit(s.space.key, "prefill", items, tag=entry)
            entry.running += 1


def _collect(dispatcher: Dispatcher, report: IngestReport, progress: Progress) -> None:
    """Wait for one batch to finish and count it."""
    result = dispatcher.next_result()
    assert result is not None, "files wait for batches but none is running"
    entry, done = result
    entry.running -= 1
    tokens = sum(n for _, n in done)
    report.caches_written += len(done)
    report.tokens_prefilled += tokens
    progress.advance(PREFILL_TASK, len(done), tokens=tokens)
