"""Record a recorded SQuAD eval run's translator retentions in the shipped translators' JSON
(`spec.metrics.qa`, what `ask --mode auto` gates on); weights and fingerprints stay unchanged.

Usage: python benchmarks/record_translator_qa.py benchmarks/results/eval/squad-200-gemma3-270m
The run must hold `direct` and the translator modes; each translator kind takes the score of the
first mode reading it (`translated` for mot, as `cag train --qa-check` does).
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
    """kind -> the qa record for that kind's first mode in the run."""
    config = json.loads((run / "config.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    if metrics["task"] != "extractive":
        raise SystemExit(f"{run}: the quality gate reads extractive F1 retention, this run is {metrics['task']}")
    modes = metrics["modes"]
    results = {}
    for kind in dict.fromkeys(TRANSLATOR_KIND.values()):
        mode = mode_for_kind(kind)
        if mode in modes:
            results[kind] = qa_record(modes, mode, dataset=config["dataset"], questions=metrics["examples"],
                                      seed=config["seed"], run=str(run.resolve().relative_to(ROOT)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a recorded run folder under benchmarks/results/eval/")
    args = parser.parse_args()
    config = json.loads((args.run / "config.json").read_text())
    for kind, result in qa_results(args.run).items():
        checkpoint = SHIPPED / f"{config['encoder']}__{config['model']}__{kind}.safetensors"
        if not checkpoint.is_file():
            print(f"no shipped {kind} translator for {config['encoder']} -> {config['model']}; skipped")
            continue
        record_qa(checkpoint, result)
        print(f"{checkpoint.name}: retention {result['retention']} {result['retention_ci95']}")


if __name__ == "__main__":
    main()
