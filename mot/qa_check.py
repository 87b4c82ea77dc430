"""A small extractive QA check after training: retention (translated F1 / direct F1) on SQuAD
questions, recorded in the translator's JSON; `ask --mode auto` reads it as its quality gate.

The questions are sampled with a seed (7) other than the reported evaluations' (0); a few may still
coincide with those. The translator never trains on them.
"""

import json
from pathlib import Path

from cag.atomic import atomic_write_text
from mot.checkpoint import paths
from cag.ask import TRANSLATOR_KIND
from mot.registry import install

QA_SEED = 7


def qa_check(checkpoint: Path, source: str, target: str, kind: str, questions: int, out: Path,
             reinstall: bool = True) -> dict:
    from eval.runner import EvalConfig, run_eval

    # the first mode reading this kind: a mot translator is checked in full `translated` mode
    mode = next(m for m, k in TRANSLATOR_KIND.items() if k == kind)
    run = run_eval(EvalConfig(dataset="squad", model=target, encoder=source, modes=("direct", mode),
                              limit=questions, seed=QA_SEED, out=str(out)))
    metrics = json.loads((run / "metrics.json").read_text())["modes"]
    result = {"dataset": "squad", "questions": questions, "seed": QA_SEED,
              "direct_f1": metrics["direct"]["f1"], "f1": metrics[mode]["f1"],
              "retention": metrics[mode]["retention"], "retention_ci95": metrics[mode]["retention_ci95"]}
    record_qa(checkpoint, result)
    if reinstall:
        install(checkpoint, source, target, kind)
    return result


def record_qa(checkpoint: Path, result: dict) -> None:
    """Write a QA retention measurement into a translator's JSON (weights and fingerprint unchanged)."""
    record_path = paths(checkpoint)[1]
    record = json.loads(record_path.read_text())
    record["spec"]["metrics"]["qa"] = result
    atomic_write_text(record_path, json.dumps(record, indent=2))
