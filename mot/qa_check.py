"""A small extractive QA check after training: retention (translated F1 / direct F1) on SQuAD
questions, recorded in the translator's JSON; `ask --mode auto` reads it as its quality gate.

The questions are sampled with a seed (7) other than the reported evaluations' (0); a few may still
coincide with those. The translator never trains on them.
"""

import json
from pathlib import Path

from cag.ask import TRANSLATOR_KIND
from cag.atomic import atomic_write_text
from mot.checkpoint import paths
from mot.registry import install

QA_SEED = 7


def qa_check(checkpoint: Path, source: str, target: str, kind: str, questions: int, out: Path,
             reinstall: bool = True) -> dict:
    from eval.runner import EvalConfig, run_eval

    mode = mode_for_kind(kind)
    run = run_eval(EvalConfig(dataset="squad", model=target, encoder=source, modes=("direct", mode),
                              limit=questions, seed=QA_SEED, out=str(out)))
    metrics = json.loads((run / "metrics.json").read_text())["modes"]
    result = qa_record(metrics, mode, dataset="squad", questions=questions, seed=QA_SEED)
    record_qa(checkpoint, result)
    if reinstall:
        install(checkpoint, source, target, kind)
    return result


def mode_for_kind(kind: str) -> str:
    """The eval mode whose score stands for a translator kind: the first mode reading it, so a mot
    translator is judged in full `translated` mode, never in a blend."""
    for mode, mode_kind in TRANSLATOR_KIND.items():
        if mode_kind == kind:
            return mode
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


def record_qa(checkpoint: Path, result: dict, key: str = "qa") -> None:
    """Write a QA retention measurement into a translator's JSON (weights and fingerprint
    unchanged): `key` "qa" (its full mode) or "qa_blend" (a translated-blend setting)."""
    record_path = paths(checkpoint)[1]
    record = json.loads(record_path.read_text())
    record["spec"]["metrics"][key] = result
    atomic_write_text(record_path, json.dumps(record, indent=2))
