"""`cag ingest`: chunk, embed and prefill documents once into a store."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from cag.defaults import DEFAULT_EMBEDDER, DEFAULT_ENCODER
from cli._errors import handle_errors
from cli.progress_display import progress_bars
from cli.options import (DeviceOption, DtypeOption, RayCpusOption, RayGpusOption, RayOption,
                         RayWorkersOption, StoreOption, ray_options)
from cli.text import printable


@handle_errors
def ingest_command(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (read recursively).")],
    store: StoreOption = None,
    encoder: Annotated[str | None, typer.Option(
        help="The one model that prefills every chunk (default: the store's own; a new store's: "
             f"{DEFAULT_ENCODER}). With Qwen generators, "
             "qwen2.5-coder-0.5b is better: their own caches for the 0.5B, better "
             "translations into the 1.5B, half the bytes per token, about 2.3x "
             "slower to ingest (docs/results.md, 'Which encoder').")] = None,
    chunk_tokens: Annotated[int | None, typer.Option(help="Chunk size in encoder tokens (default: the store's own; "
                                                          "a new store's: 256).")] = None,
    also_for: Annotated[list[str] | None, typer.Option(
        "--also-for", help="Also store this generator's own native caches (repeatable).")] = None,
    embedder: Annotated[str | None, typer.Option(help="sentence-transformers model for retrieval (default: the "
                                                      f"store's own; a new store's: {DEFAULT_EMBEDDER}).")] = None,
    faiss_factory: Annotated[str | None, typer.Option(
        help="The store's vector index: auto (Flat up to 1,000,000 chunks, then HNSW32), or a FAISS "
             "index_factory string (Flat, HNSW32, IVF1024,SQ8, ...). "
             "Recorded in the store; given again with another value, the index is rebuilt. "
             "Default: the store's own (auto for a new store).")] = None,
    cache_dtype: Annotated[str | None, typer.Option(help="Storage of chunk caches (set when a store is created; "
                                                  "default fp16): fp16, bf16, fp32, or int8 / int4 / "
                                                  "int4k-int3v (integer codes with per-group ranges, KIVI-style: "
                                                  "keys per channel, values per token; 0.52 / 0.27 / 0.24 of "
                                                  "fp16's bytes; int4k-int3v: int4 keys over 128 tokens, int3 "
                                                  "values over 64 channels after a Hadamard rotation). "
                                                  "Translations made from a store below 8 bits are kept in "
                                                  "int8.")] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Chunks per prefill batch.")] = 8,
    reuse_caches_from: Annotated[list[Path] | None, typer.Option(
        "--reuse-caches-from", help="Another store: chunk caches it holds for the same model, prefix "
                                    "and text are hard-linked instead of prefilled (repeatable).")] = None,
    device: DeviceOption = "auto",
    dtype: DtypeOption = "auto",
    ray: RayOption = None,
    ray_workers: RayWorkersOption = None,
    ray_cpus_per_worker: RayCpusOption = 1,
    ray_gpus_per_worker: RayGpusOption = 1.0,
) -> None:
    """Read files (.txt .md .pdf .html .json .jsonl), chunk them, embed them into a FAISS index and
    prefill every chunk once with the encoder; the chunk KV caches are stored on disk.

    Re-running does no model work for unchanged files; changed files are re-chunked, deleted files
    leave the store. A killed run can simply be started again. With --ray, workers of a Ray
    cluster prefill (docs/cluster.md).
    """
    from cag.ingest.pipeline import IngestOptions, ingest, store_settings

    console = Console(stderr=True)
    options = IngestOptions(**store_settings(store, encoder, embedder, chunk_tokens, cache_dtype), chunk_overlap=0,
                            faiss_factory=faiss_factory, also_for=tuple(also_for or ()), batch_size=batch_size,
                            device=device, dtype=dtype, reuse_from=tuple(reuse_caches_from or ()))
    cluster = ray_options(ray, ray_workers, ray_cpus_per_worker, ray_gpus_per_worker)
    with progress_bars() as progress:
        if cluster is None:
            report = ingest(paths, store, options, progress)
        else:
            from cag.distributed.ingest import ray_ingest
            report = ray_ingest(paths, store, options, cluster, progress)
    for path, reason in report.skipped:
        console.print(f"[yellow]skipped[/] {escape(printable(path))}: {escape(printable(reason))}", highlight=False)
    typer.echo(
        f"Store {report.store}: {report.files_seen} files seen, {report.files_ingested} ingested, "
        f"{report.files_unchanged} unchanged, {len(report.skipped)} skipped, {report.files_removed} "
        f"removed; {report.chunks_new} chunks (re)indexed, {report.caches_written} caches prefilled "
        f"({report.tokens_prefilled:,} tokens)"
        + (f", {report.caches_reused} reused from other stores" if options.reuse_from else "")
        + f"; store total {report.chunks_total} chunks, "
        f"{report.tokens_total:,} tokens, {report.bytes_on_disk / 1e6:.1f} MB on disk; "
        f"{report.seconds:.1f} s.")
