"""Record recorded SQuAD eval runs' translator retentions in the shipped translators' JSON
(`spec.metrics.qa`, what `ask --mode auto` gates on, and `spec.metrics.qa_blend`, the
translated-blend setting auto falls back to); weights and fingerprints stay unchanged.

Usage: python benchmarks/record_translator_qa.py RUN [RUN ...]
  e.g. benchmarks/results/eval/squad-200-gemma3-270m
Each run must hold `direct` and translator modes; each translator kind takes the score of the
first mode reading it (`translated` for mot, as `cag train --qa-check` does); a run holding
`translated-blend` also records that mode's score with the run's --blend and --blend-select for
the MoT translator.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cag.ask import TRANSLATOR_KIND  # noqa: E402
from mot.qa_check import mode_for_kind, qa_record, record_qa  # noqa: E402
from mot.registry import SHIPPED  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def qa_results(run: Path) -> dict:
    """(kind, metrics key) -> the qa record: each kind's first mode in the run ("qa"), and the
    run's translated-blend setting for mot ("qa_blend")."""
    config = json.loads((run / "config.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    if metrics["task"] != "extractive":
        raise SystemExit(f"{run}: the quality gate reads extractive F1 retention, this run is {metrics['task']}")
    modes = metrics["modes"]
    common = dict(dataset=config["dataset"], questions=metrics["examples"], seed=config["seed"],
                  run=str(run.resolve().relative_to(ROOT)))
    results = {}
    for kind in dict.fromkeys(TRANSLATOR_KIND.values()):
        mode = mode_for_kind(kind)
        if mode in modes:
            results[(kind, "qa")] = qa_record(modes, mode, **common)
    if "translated-blend" in modes:
        results[("mot", "qa_blend")] = {"mode": "translated-blend", "blend": config["blend"],
                                        "blend_select": config["blend_select"],
                                        **qa_record(modes, "translated-blend", **common)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="recorded run folders under benchmarks/results/eval/")
    args = parser.parse_args()
    for run in args.runs:
        config = json.loads((run / "config.json").read_text())
        for (kind, key), result in qa_results(run).items():
            checkpoint = SHIPPED / f"{config['encoder']}__{config['model']}__{kind}.safetensors"
            if not checkpoint.is_file():
                print(f"no shipped {kind} translator for {config['encoder']} -> {config['model']}; skipped")
                continue
            record_qa(checkpoint, result, key)
            print(f"{checkpoint.name} {key}: retention {result['retention']} {result['retention_ci95']}")


if __name__ == "__main__":
    main()
