#!/usr/bin/env bash
# QA evaluations of the shipped translators (issue: MoT translators), every mode side by side.
# Each run folder goes under runs/ (not committed); `python benchmarks/collect_eval.py RUN_DIR`
# copies its records into benchmarks/results/eval/. A killed run resumes when re-run.
# Usage: bash benchmarks/run_translator_evals.sh [LIMIT]   (default 40 SQuAD questions, as recorded)
set -euo pipefail
cd "$(dirname "$0")/.."
CAG=${CAG:-.venv/bin/cag}
limit=${1:-40}
modes=direct,native,none,translated,single,ridge,translated-window
for m in qwen2.5-coder-0.5b gemma3-270m; do
    $CAG eval --dataset squad --limit "$limit" --model "$m" --modes $modes --out "runs/squad-$limit-$m-translators"
    python benchmarks/collect_eval.py "runs/squad-$limit-$m-translators"
done
