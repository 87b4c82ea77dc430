#!/usr/bin/env bash
# The evaluation runs recorded in benchmarks/results/eval/ (issue: cag eval results).
# Each run folder goes under runs/ (not committed: it holds the run's store); a killed run resumes
# when its command is run again. After a run, `python benchmarks/collect_eval.py RUN_DIR` copies its
# config, predictions, metrics, report and plots into benchmarks/results/eval/.
# Usage: bash benchmarks/run_evals.sh [MODEL ...]   (default: the three packaged models)
set -euo pipefail
cd "$(dirname "$0")/.."
CAG=${CAG:-.venv/bin/cag}
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(qwen2.5-coder-0.5b smollm2-135m gemma3-270m)
for m in "${models[@]}"; do
    $CAG eval --dataset squad --limit 200 --model "$m" --out "runs/squad-200-$m"
    python benchmarks/collect_eval.py "runs/squad-200-$m"
    $CAG eval --dataset boolq --limit 200 --model "$m" --out "runs/boolq-200-$m"
    python benchmarks/collect_eval.py "runs/boolq-200-$m"
    $CAG eval --dataset arc-challenge --limit 200 --model "$m" --out "runs/arc-challenge-200-$m"
    python benchmarks/collect_eval.py "runs/arc-challenge-200-$m"
    # bf16: this CPU prefills 2-2.6x faster (the qwen and gemma runs add translator modes:
    # run_translator_evals.sh hotpotqa, same folders)
    $CAG eval --dataset hotpotqa --context-budget 2048 --model "$m" --dtype bf16 --out "runs/hotpotqa-293-budget2k-$m"
    python benchmarks/collect_eval.py "runs/hotpotqa-293-budget2k-$m"
done
