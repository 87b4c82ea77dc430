#!/usr/bin/env bash
# The evaluation runs recorded in records/eval/ (issue: cag eval results).
# Each run folder goes under runs/ (not committed: it holds the run's store); a killed run resumes
# when its command is run again. After a run, `python scripts/keep_record.py --force RUN_DIR` keeps its
# config, metrics, report and compressed predictions in records/eval/.
# Usage: bash experiments/run_evals.sh [MODEL ...]   (default: the three packaged models)
set -euo pipefail
cd "$(dirname "$0")/.."
CAG=${CAG:-.venv/bin/cag}
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(qwen2.5-coder-0.5b smollm2-135m gemma3-270m)
# The generator's compute dtype of each recorded run: bf16 prefills 2-2.6x faster on this CPU and
# was used for the runs made after `--dtype` existed (HotpotQA, gemma3-270m's SQuAD and ARC).
dtype() { case "$1:$2" in *:hotpotqa|gemma3-270m:squad|gemma3-270m:arc-challenge) echo bf16 ;; *) echo fp32 ;; esac; }
for m in "${models[@]}"; do
    $CAG eval --dataset squad --limit 200 --model "$m" --dtype "$(dtype $m squad)" --out "runs/squad-200-$m"
    python scripts/keep_record.py --force "runs/squad-200-$m"
    $CAG eval --dataset boolq --limit 200 --model "$m" --dtype "$(dtype $m boolq)" --out "runs/boolq-200-$m"
    python scripts/keep_record.py --force "runs/boolq-200-$m"
    $CAG eval --dataset arc-challenge --limit 200 --model "$m" --dtype "$(dtype $m arc-challenge)" --out "runs/arc-challenge-200-$m"
    python scripts/keep_record.py --force "runs/arc-challenge-200-$m"
    # (run_translator_evals.sh adds the translator modes to the qwen and gemma runs, same folders)
    $CAG eval --dataset hotpotqa --context-budget 2048 --model "$m" --dtype "$(dtype $m hotpotqa)" --out "runs/hotpotqa-293-budget2k-$m"
    python scripts/keep_record.py --force "runs/hotpotqa-293-budget2k-$m"
done
