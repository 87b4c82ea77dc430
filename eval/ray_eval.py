"""`cag eval --ray`: the passages ingested by Ray workers (cag.distributed), then examples x modes
spread over actors that each hold the generator (and its translators, loaded on first use); the
driver alone writes predictions.jsonl (resumable as a local run: a killed run continues where it
stopped) and the report.

A worker reads the run's store folder for cache files only (never its SQLite catalog: the driver
sends each example's chunk rows), so the run folder must be on a file system every node mounts at
the same path.
"""

import logging
from dataclasses import dataclass, replace

from cag.distributed.cluster import connect, plan_workers, start_actors
from cag.distributed.dispatch import Dispatcher
from cag.distributed.ingest import ray_ingest
from cag.distributed.options import RayOptions
from cag.distributed.worker import ModelWorker, WorkerSpec
from cag.errors import CagError
from cag.models.loading import model_identity, resolve_dtype
from cag.modes import ModeOptions
from cag.progress import Progress
from eval.runner import EXAMPLES_TASK, EvalConfig, append_record, finish_run, mode_options, prepare_run
from eval.scoring import evaluate_example

log = logging.getLogger(__name__)
POOL = "generator"


@dataclass(frozen=True)
class EvalSpec(WorkerSpec):
    """What an eval worker loads and how it answers."""

    task: str = "extractive"
    max_new_tokens: int = 32
    option_score: str = "mean"
    options: ModeOptions = ModeOptions()
    fingerprint: str = ""  # the generator as the driver sees it: every worker must load that one


class EvalWorker(ModelWorker):
    """The generator, answering one example in its modes."""

    def check_model(self) -> None:
        self.refuse_other_model(self.spec.fingerprint)

    def answer(self, example: dict, rows: list, modes: list) -> list:
        """predictions.jsonl records of `example` in each of `modes`."""
        self.ready()
        spec = self.spec
        return [evaluate_example(spec.task, mode, example, rows, self.store, self.lm, self.layout,
                                 spec.max_new_tokens, spec.option_score, spec.options) for mode in modes]


def run_eval_on_ray(config: EvalConfig, ray_options: RayOptions = RayOptions(), progress: Progress | None = None):
    """eval.runner.run_eval on a Ray cluster (the same run folder: a run may move between the two); the
    run folder."""
    progress = progress or Progress()
    if config.llamaindex:
        raise CagError("--llamaindex answers in one process: drop --ray for that run.")
    with connect(ray_options) as cluster:
        plan = plan_workers(cluster, 1, ray_options, config.device)
        config = replace(config, device=plan.device, dtype=resolve_dtype(config.dtype, plan.device))

        def ingest_fn(paths, store_dir, options, ingest_progress=None):
            return ray_ingest(paths, store_dir, options, ray_options, ingest_progress)

        # translators are matched on the driver, on CPU (it may have no GPU)
        run = prepare_run(config, progress, ingest_fn, check_config=replace(config, device="cpu"))
        generator = model_identity(config.model)  # its name and fingerprint, for the report
        work = run.work(progress)
        if work:
            spec = EvalSpec(config.model, config.dtype, plan.device, plan.num_cpus, str(run.store.folder.resolve()),
                            run.task, config.max_new_tokens, config.option_score, mode_options(config),
                            generator.fingerprint)
            _answer(work, spec, plan, run.folder / "predictions.jsonl", progress)
        return finish_run(run, generator)


def _answer(work: list, spec: EvalSpec, plan, predictions, progress: Progress) -> None:
    """Every WorkItem of `work` answered by the workers, written as results come (with what the
    driver's retrieval recorded)."""
    dispatcher = Dispatcher()
    retrieval = {item.example["id"]: item.retrieval for item in work}
    try:
        dispatcher.add_pool(POOL, start_actors(EvalWorker, plan, spec))
        for item in work:
            dispatcher.submit(POOL, "answer", item.example, item.rows, item.todo)
        with open(predictions, "a", encoding="utf-8") as out:
            while (result := dispatcher.next_result()) is not None:
                for record in result[1]:
                    append_record(out, {**record, **retrieval[record["id"]]})
                    progress.advance(EXAMPLES_TASK)
    finally:
        dispatcher.stop()
