"""`cag eval`: QA evaluations with every baseline side by side."""

from pathlib import Path
from typing import Annotated

import typer

from cag.defaults import DEFAULT_BLEND, DEFAULT_ENCODER, DEFAULT_GENERATOR
from cli._errors import handle_errors
from cli.options import (DeviceOption, RayCpusOption, RayGpusOption, RayOption, RayWorkersOption,
                         parse_layer_window, ray_options)
from cli.progress_display import progress_bars


@handle_errors
def eval_command(
    dataset: Annotated[str, typer.Option(help="JSON Lines file, or a preset: squad, boolq, arc-challenge, "
                                              "arc-easy, openbookqa, mmlu, hotpotqa, hotpotqa-20 (20 paragraphs), "
                                              "hotpotqa-amor (241 more HotpotQA questions).")],
    task: Annotated[str | None, typer.Option(help="extractive | multiple_choice | multi_doc "
                                                  "(implied by a preset).")] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Generator.")] = DEFAULT_GENERATOR,
    encoder: Annotated[str, typer.Option(help="Encoder that prefills the passages.")] = DEFAULT_ENCODER,
    modes: Annotated[str, typer.Option(help="Comma-separated: direct, native, none, translated, single, "
                                            "ridge, translated-window, translated-blend, native-blend "
                                            "(the translator modes need translators: "
                                            "`cag train`).")] = "direct,native,none",
    window: Annotated[str | None, typer.Option(help="translated-window: generator layers START:END "
                                                    "(default: the translator's training window or the "
                                                    "middle third).")] = None,
    blend: Annotated[float, typer.Option(min=0.0, max=1.0, help="-blend modes: share of context tokens "
                                         "the generator recomputes (those the question attends to "
                                         "most).")] = DEFAULT_BLEND,
    limit: Annotated[int | None, typer.Option(min=1, help="Examples to sample (default: all). A larger --limit on an existing run folder extends it, keeping the answers made (the sample is prefix-stable).")] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    top_k: Annotated[int, typer.Option(min=1, help="multi_doc: paragraphs retrieved.")] = 3,
    context_budget: Annotated[int | None, typer.Option(
        help="multi_doc: all paragraphs in order up to this many tokens instead of retrieval.")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Answer length limit.")] = 32,
    option_score: Annotated[str, typer.Option(help="multiple_choice: mean or sum log-likelihood.")] = "mean",
    dtype: Annotated[str, typer.Option(help="Generator compute dtype: fp32, bf16, fp16 or auto (answers and its "
                                            "native caches; bf16 prefills 2-2.6x faster on CPUs with "
                                            "AVX512-BF16). The encoder stays fp32.")] = "fp32",
    device: DeviceOption = "auto",
    skip_missing: Annotated[bool, typer.Option(help="Skip modes that cannot run, with a warning.")] = False,
    out: Annotated[Path | None, typer.Option(help="Run folder (default: runs/eval-...). "
                                                  "Re-running the same command resumes it.")] = None,
    reuse_caches_from: Annotated[list[Path] | None, typer.Option(
        "--reuse-caches-from", help="Another run folder (or store): chunk caches it holds for the same "
                                    "model, prefix and text are hard-linked instead of prefilled "
                                    "(repeatable).")] = None,
    cache_dtype: Annotated[str, typer.Option(help="Storage of the run's chunk caches: fp16, bf16, fp32, int8, "
                                                  "int4 or int4k-int3v (part of the run's identity).")] = "fp16",
    keep_translated: Annotated[bool, typer.Option(
        help="Store chunk translations in the run's store: reused by translated-window/-blend and when a "
             "killed run resumes. --no-keep-translated translates every time and stores none (a "
             "HotpotQA run stores about 7 GB per translator for gemma3-270m, 4.6 GB for qwen2.5-coder-0.5b).")] = True,
    ray: RayOption = None,
    ray_workers: RayWorkersOption = None,
    ray_cpus_per_worker: RayCpusOption = 1,
    ray_gpus_per_worker: RayGpusOption = 1.0,
) -> None:
    """Run a QA dataset through cag's real path (ingest, store, assemble, generate) in several
    modes and write config.json, predictions.jsonl, metrics.json, report.md and plots.

    Extractive sets keep one question per distinct passage. Retention = score / direct score, with a
    bootstrap 95% interval. A killed run continues where it stopped when started again. With --ray,
    workers of a Ray cluster ingest the passages and answer the examples (docs/cluster.md).
    """
    from eval.runner import EvalConfig, run_eval

    config = EvalConfig(dataset, task, model, encoder, tuple(m.strip() for m in modes.split(",") if m.strip()),
                        limit, seed, top_k, context_budget, max_new_tokens, option_score,
                        skip_missing=skip_missing, out=str(out) if out else None,
                        window=parse_layer_window(window), dtype=dtype, device=device, blend=blend,
                        reuse_caches=tuple(reuse_caches_from or ()),
                        keep_translated=keep_translated, cache_dtype=cache_dtype)
    cluster = ray_options(ray, ray_workers, ray_cpus_per_worker, ray_gpus_per_worker)
    with progress_bars() as progress:
        if cluster is None:
            run = run_eval(config, progress)
        else:
            from eval.ray_eval import run_eval_on_ray
            run = run_eval_on_ray(config, cluster, progress)
    typer.echo((run / "report.md").read_text())
    typer.echo(f"Run folder: {run}")
