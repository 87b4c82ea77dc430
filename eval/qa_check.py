"""Translators' recorded QA retention (translated F1 / direct F1 on SQuAD), written into the
translator's JSON: `metrics.qa` for its full mode, `metrics.qa_blend` for a translated-blend
setting; `ask --mode auto` reads them as its quality gate.

`qa_check` runs a small check after training (`cag train --qa-check N`); its questions are sampled
with a seed (7) other than the reported evaluations' (0), so a few may still coincide with those.
The translator never trains on them. `qa_results` reads the records of a finished eval run
(scripts/record_translator_qa.py puts them into shipped translators).
"""

import json
from pathlib import Path

from cag.modes import modes
from cag.translations import TranslationId, TranslatorKind
from eval.runner import EvalConfig, run_eval
from mot.checkpoint import record_qa
from mot.registry import install

QA_SEED = 7


def qa_check(checkpoint: Path, translation: TranslationId, questions: int, out: Path,
             reinstall: bool = True) -> dict:
    mode = mode_for_kind(translation.kind)
    run = run_eval(EvalConfig(dataset="squad", model=translation.generator, encoder=translation.source,
                              modes=("direct", mode), limit=questions, seed=QA_SEED, out=str(out)))
    metrics = json.loads((run / "metrics.json").read_text())["modes"]
    result = qa_record(metrics, mode, dataset="squad", questions=questions, seed=QA_SEED)
    record_qa(checkpoint, result)
    if reinstall:
        install(checkpoint, translation)
    return result


def mode_for_kind(kind: TranslatorKind) -> str:
    """The eval mode whose score stands for a translator kind: the first registered mode reading it
    that neither recomputes nor replays, so a mot translator is judged in full `translated` mode."""
    kind = TranslatorKind(kind)
    for mode in modes():
        if mode.translator_kind is kind and not mode.recomputes and not mode.uses_window:
            return mode.name
    raise ValueError(f"no eval mode reads translator kind {kind!r}")


def qa_record(metrics_modes: dict, mode: str, dataset: str, questions: int, seed: int,
              run: str | None = None) -> dict:
    """The `metrics.qa` record of one mode of an eval run (`metrics.json`'s "modes")."""
    scores = metrics_modes[mode]
    record = {"dataset": dataset, "questions": questions, "seed": seed,
              "direct_f1": metrics_modes["direct"]["f1"], "f1": scores["f1"],
              "retention": scores["retention"], "retention_ci95": scores["retention_ci95"]}
    if run is not None:
        record["run"] = run
    return record


def qa_results(run: Path, run_name: str | None = None) -> dict:
    """(kind, metrics key) -> the qa record of a finished extractive eval run: each translator
    kind's full mode ("qa"), and the run's translated-blend setting for mot ("qa_blend").
    `run_name`: how the records name the run (default: its path)."""
    config = json.loads((run / "config.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    if metrics["task"] != "extractive":
        raise ValueError(f"{run}: the quality gate reads extractive F1 retention, this run is {metrics['task']}")
    held = metrics["modes"]
    common = dict(dataset=config["dataset"], questions=metrics["examples"], seed=config["seed"],
                  run=run_name or str(run))
    results = {}
    for kind in dict.fromkeys(m.translator_kind for m in modes() if m.translator_kind):
        mode = mode_for_kind(kind)
        if mode in held:
            results[(kind, "qa")] = qa_record(held, mode, **common)
    blended = next(m.name for m in modes() if m.recomputes and m.translator_kind is TranslatorKind.MOT)
    if blended in held:
        results[(TranslatorKind.MOT, "qa_blend")] = {"mode": blended, "blend": config["blend"],
                                                     "blend_select": config["blend_select"],
                                                     **qa_record(held, blended, **common)}
    return results
