"""`cag eval`: QA evaluations with every baseline side by side."""

import typer

from cli._errors import handle_errors
from cli.config_options import with_config
from cli.options import RayCpusOption, RayGpusOption, RayOption, RayWorkersOption, ray_options
from cli.progress_display import progress_bars
from eval.runner import EvalConfig


@handle_errors
@with_config(EvalConfig, ("dataset", "task", "model", "encoder", "modes", "window", "blend", "limit", "seed",
                          "top_k", "context_budget", "max_new_tokens", "option_score", "dtype", "device",
                          "corpus", "distractors", "llamaindex", "skip_missing", "out", "reuse_caches", "cache_dtype",
                          "keep_translated"))
def eval_command(
    ray: RayOption = None,
    ray_workers: RayWorkersOption = None,
    ray_cpus_per_worker: RayCpusOption = 1,
    ray_gpus_per_worker: RayGpusOption = 1.0,
    config: EvalConfig = None,
) -> None:
    """Run a QA dataset through cag's real path (ingest, store, assemble, generate) in several
    modes and write config.json, predictions.jsonl, metrics.json, report.md and plots.

    Extractive sets keep one question per distinct passage. Retention = score / direct score, with a
    bootstrap 95% interval. A killed run continues where it stopped when started again. With --ray,
    workers of a Ray cluster ingest the passages and answer the examples (docs/cluster.md).
    """
    from eval.runner import run_eval

    cluster = ray_options(ray, ray_workers, ray_cpus_per_worker, ray_gpus_per_worker)
    with progress_bars() as progress:
        if cluster is None:
            run = run_eval(config, progress)
        else:
            from eval.ray_eval import run_eval_on_ray
            run = run_eval_on_ray(config, cluster, progress)
    typer.echo((run / "report.md").read_text())
    typer.echo(f"Run folder: {run}")
