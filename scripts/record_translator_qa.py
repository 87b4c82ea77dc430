"""Record finished SQuAD eval runs' translator retentions in the shipped translators' JSON
(`spec.metrics.qa`, what `ask --mode auto` gates on, and `spec.metrics.qa_blend`, the
translated-blend setting auto falls back to); weights and fingerprints stay unchanged. A translator
no set-up uses has its JSON in records/translators/ (make translators-extra): recorded there.

Usage: python scripts/record_translator_qa.py RUN [RUN ...]
  e.g. records/eval/squad-200-gemma3-270m
Each run must hold `direct` and translator modes; each translator kind takes the score of its full
mode (`translated` for mot, as `cag train --qa-check` does); a run holding `translated-blend` also
records that mode's score with the run's blend setting for the MoT translator.
"""

import argparse
import json
from pathlib import Path

from cag.translations import TranslationId
from eval.qa_check import qa_results
from mot.checkpoint import record_qa
from mot.registry import SHIPPED

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "records" / "translators"  # the extra translators' JSON (their weights in git history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="finished eval run folders, e.g. under records/eval/")
    args = parser.parse_args()
    for run in args.runs:
        config = json.loads((run / "config.json").read_text())
        for (kind, key), result in qa_results(run, str(run.resolve().relative_to(ROOT))).items():
            translation = TranslationId(config["encoder"], config["model"], kind)
            checkpoint = next((folder / f"{translation.file_stem}.safetensors" for folder in (SHIPPED, RECORDED)
                               if (folder / f"{translation.file_stem}.json").is_file()), None)
            if checkpoint is None:
                print(f"no shipped or recorded translator {translation}; skipped")
                continue
            record_qa(checkpoint, result, key)
            print(f"{checkpoint.name} {key}: retention {result['retention']} {result['retention_ci95']}")


if __name__ == "__main__":
    main()
