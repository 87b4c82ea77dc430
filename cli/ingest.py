"""`cag ingest`: chunk, embed and prefill documents once into a store."""

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from cag.ingest.pipeline import STORE_SETTINGS, IngestOptions
from cli._errors import handle_errors
from cli.config_options import with_config
from cli.progress_display import progress_bars
from cli.options import RayCpusOption, RayGpusOption, RayOption, RayWorkersOption, StoreOption, ray_options
from cli.text import printable


@handle_errors
@with_config(IngestOptions, ("encoder", "chunk_tokens", "also_for", "embedder", "faiss_factory", "cache_dtype",
                             "batch_size", "reuse_from", "device", "dtype"),
             optional=STORE_SETTINGS, unset_means="the store's own; a new store's: {default}")
def ingest_command(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (read recursively).")],
    store: StoreOption = None,
    ray: RayOption = None,
    ray_workers: RayWorkersOption = None,
    ray_cpus_per_worker: RayCpusOption = 1,
    ray_gpus_per_worker: RayGpusOption = 1.0,
    unset: frozenset = frozenset(),
    config: IngestOptions = None,
) -> None:
    """Read files (.txt .md .pdf .html .json .jsonl), chunk them, embed them into a FAISS index and
    prefill every chunk once with the encoder; the chunk KV caches are stored on disk.

    Re-running does no model work for unchanged files; changed files are re-chunked, deleted files
    leave the store. A killed run can simply be started again. With --ray, workers of a Ray
    cluster prefill (docs/cluster.md).
    """
    from cag.ingest.pipeline import ingest, store_settings

    config = replace(config, **store_settings(store, unset))  # left out: the existing store's own
    console = Console(stderr=True)
    cluster = ray_options(ray, ray_workers, ray_cpus_per_worker, ray_gpus_per_worker)
    with progress_bars() as progress:
        if cluster is None:
            report = ingest(paths, store, config, progress)
        else:
            from cag.distributed.ingest import ray_ingest
            report = ray_ingest(paths, store, config, cluster, progress)
    for path, reason in report.skipped:
        console.print(f"[yellow]skipped[/] {escape(printable(path))}: {escape(printable(reason))}", highlight=False)
    typer.echo(
        f"Store {report.store}: {report.files_seen} files seen, {report.files_ingested} ingested, "
        f"{report.files_unchanged} unchanged, {len(report.skipped)} skipped, {report.files_removed} "
        f"removed; {report.chunks_new} chunks (re)indexed, {report.caches_written} caches prefilled "
        f"({report.tokens_prefilled:,} tokens)"
        + (f", {report.caches_reused} reused from other stores" if config.reuse_from else "")
        + f"; store total {report.chunks_total} chunks, "
        f"{report.tokens_total:,} tokens, {report.bytes_on_disk / 1e6:.1f} MB on disk; "
        f"{report.seconds:.1f} s.")
