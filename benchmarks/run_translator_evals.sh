#!/usr/bin/env bash
# The QA evaluations of the shipped translators recorded in benchmarks/results/eval/ (issue: MoT
# translators), every mode side by side. Run folders go under runs/ (not committed); a killed run
# resumes when re-run; `python benchmarks/collect_eval.py RUN_DIR` copies its records.
# Recorded: qwen 40 SQuAD questions with translated-window too; gemma 20 (session time ran out).
set -euo pipefail
cd "$(dirname "$0")/.."
CAG=${CAG:-.venv/bin/cag}
$CAG eval --dataset squad --limit 40 --model qwen2.5-coder-0.5b \
    --modes direct,native,none,translated,single,ridge,translated-window --out runs/squad-40-qwen2.5-coder-0.5b-translators
python benchmarks/collect_eval.py runs/squad-40-qwen2.5-coder-0.5b-translators
$CAG eval --dataset squad --limit 20 --model gemma3-270m \
    --modes direct,native,none,translated,single,ridge --out runs/squad-20-gemma3-270m-translators
python benchmarks/collect_eval.py runs/squad-20-gemma3-270m-translators
