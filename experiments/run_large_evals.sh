#!/usr/bin/env bash
# A larger generator of the same family: qwen2.5-coder-1.5b answering from qwen2.5-coder-0.5b's
# caches (docs/results.md, "A larger generator of the same family"). Every command whose result is
# recorded under records/. Run folders go under runs/ (not committed); scripts/keep_record.py
# and collect_training.py copy their records. One model-heavy job at a time (the CPU is shared).
#   bash experiments/run_large_evals.sh check train ship squad speed hotpotqa record
#   bash experiments/run_large_evals.sh train-smollm squad-smollm   (smollm2-135m as the encoder)
#   bash experiments/run_large_evals.sh train-qwen-gemma squad-qwen-gemma   (qwen2.5-coder-0.5b into gemma3-270m)
#   bash experiments/run_large_evals.sh train-qwen-smollm squad-qwen-smollm   (qwen2.5-coder-0.5b into smollm2-135m)
#   bash experiments/run_large_evals.sh train-qwen-smollm-r112 squad-qwen-smollm-r112   (the same at token rank 112; r128 too)
#   bash experiments/run_large_evals.sh hotpotqa-smollm   (smollm2-135m into the 1.5B on HotpotQA)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # this tree, not an editable install elsewhere
PY=${PY:-.venv/bin/python}
CAG="$PY -m cli"
L=qwen2.5-coder-1.5b
Q=qwen2.5-coder-0.5b
NICE="nice -n 5"
steps=("$@")
source experiments/translator_home.sh  # translator_home GENERATOR KIND=CHECKPOINT...
[ ${#steps[@]} -gt 0 ] || steps=(check train ship squad speed hotpotqa record)

for step in "${steps[@]}"; do
  case $step in
    check)  # does bf16 answer as fp32? the first 20 of the SQuAD sample, the modes without translators
      for d in fp32 bf16; do
        $NICE $CAG eval --dataset squad --limit 20 --encoder $Q --model $L --modes direct,native,none --dtype $d \
          --out runs/eval/squad-20-qwen1.5b-$d
      done ;;
    train)  # the shipped recipe (120 steps, --target-embeddings 2 --token-rank 512) on half its windows:
      # 128 + 16 held-out instead of 256 + 32; a ridge fit (closed form) on the same windows beside it.
      # On a quiet CPU a window took about 5 s to prepare and a step 8 s (48 s a window when shared).
      $NICE $CAG train --source $Q --target $L --kind ridge --steps 0 --target-embeddings 2 --token-rank 512 \
        --weights-dtype fp16 --windows 128 --heldout-windows 16 --data runs/data-qwen05-qwen15-text \
        --out runs/train-qwen05-qwen15-ridge
      $NICE $CAG train --source $Q --target $L --kind mot --weights-dtype int8 --windows 128 --heldout-windows 16 \
        --eval-every 40 --data runs/data-qwen05-qwen15-text --out runs/train-qwen05-qwen15-mot ;;
    ship)
      $PY experiments/collect_training.py runs/train-qwen05-qwen15-ridge runs/train-qwen05-qwen15-mot --ship ;;
    train-smollm)  # the other encoder into the 1.5B: the same recipe and window counts from smollm2-135m
      $NICE $CAG train --source smollm2-135m --target $L --kind mot --weights-dtype int8 --windows 128 \
        --heldout-windows 16 --eval-every 40 --no-install --out runs/train-smollm-qwen15-mot ;;
    squad-smollm)  # its translations on the squad step's questions; direct kept from that run
      $PY experiments/fork_eval_run.py records/eval/squad-200-qwen05-qwen15 runs/eval/squad-200-smollm-qwen15 \
        --keep direct --encoder smollm2-135m
      home=$(translator_home $L mot=runs/train-smollm-qwen15-mot/translator)
      CAG_HOME=$home $NICE $CAG eval --dataset squad --limit 200 --encoder smollm2-135m --model $L \
        --dtype bf16 --modes direct,translated,translated-blend --blend 0.25 --out runs/eval/squad-200-smollm-qwen15 ;;
    train-qwen-gemma)  # the encoder question into gemma3-270m: the recipe of smollm2-135m's 192-window MoT
      $NICE $CAG train --source $Q --target gemma3-270m --kind mot --target-embeddings 2 --token-rank 512 \
        --weights-dtype int8 --windows 192 --no-install --out runs/train-qwen05-gemma-mot ;;
    squad-qwen-gemma)  # its translations on that MoT's SQuAD 200 questions; direct, native, none kept
      $PY experiments/fork_eval_run.py records/eval/squad-200-gemma-mot-r512 runs/eval/squad-200-qwen05-gemma \
        --keep direct,native,none --encoder $Q
      home=$(translator_home gemma3-270m mot=runs/train-qwen05-gemma-mot/translator)
      CAG_HOME=$home $NICE $CAG eval --dataset squad --limit 200 --encoder $Q --model gemma3-270m \
        --dtype bf16 --modes direct,native,none,translated --out runs/eval/squad-200-qwen05-gemma ;;
    train-qwen-smollm)  # the encoder question into smollm2-135m as a generator: the qwen-gemma recipe
      $NICE $CAG train --source $Q --target smollm2-135m --kind mot --target-embeddings 2 --token-rank 512 \
        --weights-dtype int8 --windows 192 --no-install --out runs/train-qwen05-smollm-mot ;;
    train-qwen-smollm-r*)  # the same windows, token embeddings at a lower rank (r128, r112): the rank-512
      # translator is 15.9% of smollm2-135m's parameters, r128 10.1%, r112 under the shipped budget of a tenth
      r=${step#train-qwen-smollm-r}
      $NICE $CAG train --source $Q --target smollm2-135m --kind mot --target-embeddings 2 --token-rank $r \
        --weights-dtype int8 --windows 192 --no-install --data runs/train-qwen05-smollm-mot/data \
        --out runs/train-qwen05-smollm-mot-r$r ;;
    squad-qwen-smollm-r*)  # its translations on the same questions (a fork of that run: its store's encoder
      # caches kept; translations are keyed by the translator's fingerprint)
      r=${step#squad-qwen-smollm-r}
      $PY experiments/fork_eval_run.py runs/eval/squad-200-qwen05-smollm runs/eval/squad-200-qwen05-smollm-r$r \
        --keep direct,native,none
      home=$(translator_home smollm2-135m mot=runs/train-qwen05-smollm-mot-r$r/translator)
      CAG_HOME=$home $NICE $CAG eval --dataset squad --limit 200 --encoder $Q --model smollm2-135m \
        --modes direct,native,none,translated --out runs/eval/squad-200-qwen05-smollm-r$r ;;
    squad-qwen-smollm)  # its translations on smollm2-135m's SQuAD 200 questions (fp32, as that run ran);
      # direct, native (smollm2-135m's own caches) and none kept
      $PY experiments/fork_eval_run.py records/eval/squad-200-smollm2-135m runs/eval/squad-200-qwen05-smollm \
        --keep direct,native,none --encoder $Q
      home=$(translator_home smollm2-135m mot=runs/train-qwen05-smollm-mot/translator)
      CAG_HOME=$home $NICE $CAG eval --dataset squad --limit 200 --encoder $Q --model smollm2-135m \
        --modes direct,native,none,translated --out runs/eval/squad-200-qwen05-smollm ;;
    hotpotqa-smollm)  # the default encoder into the 1.5B on the hotpotqa step's questions; the budget counts
      # encoder tokens, so direct is answered again (another tokenizer may fit other paragraphs).
      # (first run stopped for time at 61 questions; the same command extended it to 100)
      $PY experiments/fork_eval_run.py records/eval/hotpotqa-100-qwen05-qwen15 runs/eval/hotpotqa-100-smollm-qwen15 \
        --keep none --encoder smollm2-135m
      $NICE $CAG eval --dataset hotpotqa --context-budget 2048 --limit 100 --encoder smollm2-135m --model $L \
        --dtype bf16 --modes direct,none,translated,translated-blend --blend 0.25 \
        --out runs/eval/hotpotqa-100-smollm-qwen15 ;;
    squad)
      $NICE $CAG eval --dataset squad --limit 200 --encoder $Q --model $L --dtype bf16 \
        --modes direct,native,none,translated,ridge,translated-blend --blend 0.25 \
        --out runs/eval/squad-200-qwen05-qwen15 ;;
    speed)  # TTFT at about 2k context tokens, in process and one-shot (cag ask --json); one thread,
      # as the 0.5B's record (it ran beside the squad step)
      OMP_NUM_THREADS=1 $NICE $PY benchmarks/bench_translated_speed.py --encoder $Q --generator $L --dtype bf16 \
        --modes direct,native,none,translated,ridge,translated-blend --blends 0.25 --repeats 3 --one-shot \
        --out records/translated_speed-$L-bf16.json ;;
    hotpotqa)
      $NICE $CAG eval --dataset hotpotqa --context-budget 2048 --limit ${HOTPOT_LIMIT:-100} --encoder $Q --model $L \
        --dtype bf16 --modes direct,native,none,translated,translated-blend --blend 0.25 \
        --out runs/eval/hotpotqa-${HOTPOT_LIMIT:-100}-qwen05-qwen15 ;;
    record)
      $PY scripts/record_translator_qa.py records/eval/squad-200-qwen05-qwen15 ;;
    *) echo "unknown step $step"; exit 1 ;;
  esac
done
