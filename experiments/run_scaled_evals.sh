#!/usr/bin/env bash
# The scaled modes (cag.modes.scaled): the context's share of attention tuned on HotpotQA training
# questions, then measured on the dev questions side by side with native and direct.
#   bash experiments/run_scaled_evals.sh [tune] [hotpotqa20] [hotpotqa] [hotpotqa-translated]
# records: records/context_scale-hotpotqa-train20.json (tune); the two dev runs were stopped for time and
# their folders renamed for the questions answered in every mode before collect_eval.py copied them:
# records/eval/hotpotqa20-96-budget4k-native-scaled (hotpotqa20),
# records/eval/hotpotqa-108-budget2k-native-scaled (hotpotqa, then hotpotqa-translated)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CAG="$PY -m cli"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tune hotpotqa20 hotpotqa)

for step in "${steps[@]}"; do
  case $step in
    tune)  # KL to reading the text over direct's answers, per (temperature, scale); stopped at 12 questions
      $PY scripts/build_hotpotqa_wide.py --split train
      $PY experiments/probe_parallel_attention.py --task multi_doc --limit 24 \
        --dataset data/hotpotqa_distractor/train_20passages.jsonl --context-budget 4096 --no-f1 \
        --grid 1:1,1:0.5,1:0.35,1:0.25,1:0.15,0.95:0.35,1.05:0.35 \
        --out runs/probe-train20 --record records/context_scale-hotpotqa-train20.json ;;
    hotpotqa20)  # twenty paragraphs, about 2,700 generator tokens in about 20 chunks
      $CAG eval --dataset hotpotqa-20 --context-budget 4096 --limit 200 --dtype bf16 \
        --modes direct,native,native-scaled --context-scale 0.25 --out runs/parallel-hotpotqa20-200 ;;
    hotpotqa)  # ten paragraphs, about 1,350 tokens
      $CAG eval --dataset hotpotqa --context-budget 2048 --limit 200 --dtype bf16 \
        --modes direct,native,native-scaled --context-scale 0.25 --out runs/parallel-hotpotqa-200 ;;
    hotpotqa-translated)  # translated caches, added to the hotpotqa step's run on the 108 questions it answered
      # in every mode (recorded as records/eval/hotpotqa-108-budget2k-native-scaled); translated-scaled
      # reads the translations translated stored
      $CAG eval --dataset hotpotqa --context-budget 2048 --limit 108 --dtype bf16 \
        --modes direct,native,native-scaled,translated,translated-scaled --context-scale 0.25 \
        --out runs/parallel-hotpotqa-200 ;;
    *) echo "unknown step $step" >&2; exit 1 ;;
  esac
done
