#!/usr/bin/env bash
# The QA evaluations of the translators recorded in records/eval/ (issues: MoT
# translators; translated caches that keep the facts), every mode side by side. Run folders go
# under runs/ (not committed); a killed run resumes when re-run; `python
# scripts/keep_record.py RUN_DIR` copies its records. Long: on 2 CPU cores SQuAD 200 with six
# modes takes about an hour, BoolQ 200 about 20 minutes. Pass step names to run only some:
#   bash experiments/run_translator_evals.sh squad boolq cloze cloze-equal attention depth blend hotpotqa hotpot60-blend gemma-squad speed frontier
set -euo pipefail
cd "$(dirname "$0")/.."
CAG=${CAG:-.venv/bin/cag}
PY=${PY:-.venv/bin/python}
EVAL="$PY experiments/eval_with_selection.py eval"  # cag eval, with the experiment-only blend selections
Q=qwen2.5-coder-0.5b
G=gemma3-270m
ALL="direct,native,none,translated,single,ridge"
steps=("$@")

source experiments/translator_home.sh  # translator_home GENERATOR KIND=CHECKPOINT...
[ ${#steps[@]} -gt 0 ] || steps=(squad boolq cloze cloze-equal attention depth blend hotpotqa hotpot60-blend gemma-squad speed frontier)
for step in "${steps[@]}"; do
  case $step in
    squad)  # 200 questions with distinct passages; the first recorded runs used 40 (qwen) and 20 (gemma)
      $EVAL --dataset squad --limit 200 --model $Q --modes $ALL --out runs/squad-200-$Q
      $PY scripts/keep_record.py --force runs/squad-200-$Q ;;
    boolq)
      for m in $Q $G; do
        $EVAL --dataset boolq --limit 200 --model $m --modes $ALL --out runs/boolq-200-$m
        $PY scripts/keep_record.py --force runs/boolq-200-$m
      done ;;
    cloze)  # the MoT translator trained on cloze continuations, on the same 200 SQuAD questions
      $CAG train --source smollm2-135m --target $Q --kind mot --continuation cloze --target-embeddings 0 --no-install \
        --out runs/train-smollm2-135m-$Q-mot-full-cloze --data runs/train-data-smollm2-135m-$Q-cloze
      home=$(translator_home $Q mot=runs/train-smollm2-135m-$Q-mot-full-cloze/translator)
      for d in squad boolq; do
        [ -d runs/$d-200-$Q-mot-cloze ] || $PY experiments/fork_eval_run.py runs/$d-200-$Q runs/$d-200-$Q-mot-cloze
        CAG_HOME=$home $EVAL --dataset $d --limit 200 --model $Q --modes direct,native,none,translated \
          --out runs/$d-200-$Q-mot-cloze
        $PY scripts/keep_record.py --force runs/$d-200-$Q-mot-cloze
      done ;;
    cloze-equal)  # MoT and single trained alike (cloze, 384 windows, 240 steps), on the same 200 SQuAD questions
      D=runs/train-data-smollm2-135m-$Q-cloze-384
      common="--source smollm2-135m --target $Q --continuation cloze --windows 384 --target-embeddings 0 --no-install --data $D"
      $CAG train $common --kind ridge --out runs/train-$Q-ridge-cloze-384  # prepares the windows once
      for k in mot single; do
        OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $CAG train $common --kind $k --steps 240 --eval-every 80 \
          --out runs/train-$Q-$k-cloze-384-240 &
      done
      wait
      home=$(translator_home $Q mot=runs/train-$Q-mot-cloze-384-240/translator single=runs/train-$Q-single-cloze-384-240/translator)
      out=runs/squad-200-$Q-cloze-384-240
      [ -d $out ] || $PY experiments/fork_eval_run.py records/eval/squad-200-$Q $out
      CAG_HOME=$home $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated,single \
        --reuse-caches-from runs/squad-200-$Q --out $out
      $PY scripts/keep_record.py --force $out
      $PY experiments/compare_runs.py $out:translated $out:single records/eval/squad-200-$Q:translated \
        records/eval/squad-200-$Q:single ;;
    attention)  # chunk attention (width 64, 4 heads) in front of the mixtures, else as cloze-equal
      D=runs/train-data-smollm2-135m-$Q-cloze-384
      common="--source smollm2-135m --target $Q --continuation cloze --windows 384 --target-embeddings 0 --no-install --data $D"
      for k in mot single; do
        OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $CAG train $common --kind $k --steps 240 --eval-every 80 \
          --attention-dim 64 --attention-heads 4 --out runs/train-$Q-$k-attn64-cloze-384-240 &
      done
      wait
      home=$(translator_home $Q mot=runs/train-$Q-mot-attn64-cloze-384-240/translator single=runs/train-$Q-single-attn64-cloze-384-240/translator)
      out=runs/squad-200-$Q-attn64-cloze-384-240
      [ -d $out ] || $PY experiments/fork_eval_run.py records/eval/squad-200-$Q $out
      CAG_HOME=$home $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated,single \
        --reuse-caches-from runs/squad-200-$Q-cloze-384-240 --out $out
      $PY scripts/keep_record.py --force $out
      cloze=records/eval/squad-200-$Q-cloze-384-240
      $PY experiments/compare_runs.py $out:translated $cloze:translated $out:single $cloze:single ;;
    depth)  # QA against the injection window's start: MoT in 6 of qwen's 24 layers, 40 questions
      [ -d runs/squad-40-$Q-translators ] || $EVAL --dataset squad --limit 40 --model $Q \
        --modes direct --out runs/squad-40-$Q-translators
      for w in 0:6 6:12 12:18 18:24; do
        out=runs/squad-40-$Q-window-${w/:/-}
        [ -d $out ] || $PY experiments/fork_eval_run.py runs/squad-40-$Q-translators $out --keep direct
        $EVAL --dataset squad --limit 40 --model $Q --modes direct,translated-window --window $w --out $out
        $PY scripts/keep_record.py --force $out
      done ;;
    blend)  # the generator recomputes 15% / 50% of the translated context's tokens (same 200 questions)
      $EVAL --dataset squad --limit 200 --model $Q --modes $ALL,translated-blend --blend 0.15 --out runs/squad-200-$Q
      $PY scripts/keep_record.py --force runs/squad-200-$Q
      for f in 30 50; do
        [ -d runs/squad-200-$Q-blend$f ] || $PY experiments/fork_eval_run.py runs/squad-200-$Q runs/squad-200-$Q-blend$f --keep $ALL
        $EVAL --dataset squad --limit 200 --model $Q --modes $ALL,translated-blend --blend 0.$f --out runs/squad-200-$Q-blend$f
        $PY scripts/keep_record.py --force runs/squad-200-$Q-blend$f
      done
      # the control for the probe: the same share of tokens, chosen at random
      out=runs/squad-200-$Q-blend50-random
      [ -d $out ] || $PY experiments/fork_eval_run.py runs/squad-200-$Q $out --keep $ALL
      $EVAL --dataset squad --limit 200 --model $Q --modes $ALL,translated-blend --blend 0.5 --blend-select random --out $out
      $PY scripts/keep_record.py --force $out ;;
    hotpotqa)  # all 293 questions, every paragraph up to 2,048 tokens; the generators compute in bf16
      $EVAL --dataset hotpotqa --context-budget 2048 --model $Q --dtype bf16 --modes $ALL,native-blend \
        --blend 0.15 --out runs/hotpotqa-293-budget2k-$Q
      $PY scripts/keep_record.py --force runs/hotpotqa-293-budget2k-$Q
      # the encoder's 3,091 chunk caches are the same bytes in both runs: linked, not prefilled again
      $EVAL --dataset hotpotqa --context-budget 2048 --model $G --dtype bf16 --modes $ALL \
        --reuse-caches-from runs/hotpotqa-293-budget2k-$Q --out runs/hotpotqa-293-budget2k-$G
      $PY scripts/keep_record.py --force runs/hotpotqa-293-budget2k-$G ;;
    hotpot60-blend)  # blend settings on the first 60 HotpotQA questions (forks of the 293 run; needs
      # runs/hotpotqa-293-budget2k-smollm2-135m, whose encoder caches are linked, not prefilled)
      H=runs/hotpotqa-293-budget2k-$Q
      common="--dataset hotpotqa --context-budget 2048 --model $Q --dtype bf16 --limit 60"
      out=runs/hotpotqa-60-budget2k-$Q-starts  # native-blend with the chunk-start selection
      [ -d $out ] || $PY experiments/fork_eval_run.py $H $out --keep direct,native --limit 60
      $EVAL $common --modes direct,native,native-blend --blend 0.15 --blend-select starts --out $out
      out=runs/hotpotqa-60-budget2k-$Q-deviation  # the recorded deviation native-blend, these 60 only
      [ -d $out ] || $PY experiments/fork_eval_run.py $H $out --keep direct,native,native-blend --limit 60
      $EVAL $common --modes direct,native,native-blend --blend 0.15 \
        --reuse-caches-from runs/hotpotqa-60-budget2k-$Q-starts --out $out
      for share in 15 25 50; do
        out=runs/hotpotqa-60-budget2k-$Q-tblend$share
        [ -d $out ] || $PY experiments/fork_eval_run.py $H $out --keep direct,native,none,translated --limit 60
        $EVAL $common --modes direct,native,none,translated,translated-blend --blend 0.$share \
          --no-keep-translated --reuse-caches-from runs/hotpotqa-293-budget2k-smollm2-135m \
          --reuse-caches-from runs/hotpotqa-60-budget2k-$Q-starts --out $out
      done
      for r in starts deviation tblend15 tblend25 tblend50; do
        $PY scripts/keep_record.py --force runs/hotpotqa-60-budget2k-$Q-$r
      done ;;
    gemma-squad)
      $EVAL --dataset squad --limit 200 --model $G --dtype bf16 --modes $ALL,translated-blend --blend 0.15 \
        --out runs/squad-200-$G
      $PY scripts/keep_record.py --force runs/squad-200-$G
      $PY benchmarks/record_translator_qa.py records/eval/squad-200-$G ;;
    speed)  # TTFT of every ask mode at ~2,048 tokens, one alternating run
      $PY benchmarks/bench_translated_speed.py --generator $Q --repeats 2 --blends 0.15,0.25,0.3,0.5 \
        --selects deviation,starts --out records/translated_speed-$Q.json ;;
    frontier)  # retention against TTFT speedup at ~2,048 tokens (after the speed benchmark and the runs above)
      E=records/eval
      series=(--eval "SQuAD 200=$E/squad-200-$Q" --eval "SQuAD 200, cloze MoT=$E/squad-200-$Q-mot-cloze:translated=MoT cloze")
      series+=(--eval "SQuAD 200, blend 0.3=$E/squad-200-$Q-blend30" --eval "SQuAD 200, blend 0.5=$E/squad-200-$Q-blend50")
      # random selection skips the probe: plotted at the deviation blend's speed (slightly slower)
      series+=(--eval "SQuAD 200, blend 0.5 random=$E/squad-200-$Q-blend50-random:translated-blend=random 0.5")
      for w in 0-6 6-12 12-18 18-24; do
        series+=(--eval "SQuAD 40, window $w=$E/squad-40-$Q-window-$w:translated-window=window $w")
      done
      $PY benchmarks/plot_frontier.py --speed records/translated_speed-$Q.json "${series[@]}" \
        --out records/frontier-$Q.png
      H=$E/hotpotqa-60-budget2k-$Q  # multi-document contexts: their own plot
      series=(--eval "HotpotQA 60=$H-deviation" --eval "HotpotQA 60, starts=$H-starts")
      for share in 15 25 50; do series+=(--eval "HotpotQA 60, translated-blend 0.$share=$H-tblend$share"); done
      $PY benchmarks/plot_frontier.py --speed records/translated_speed-$Q.json "${series[@]}" \
        --out records/frontier-$Q-hotpotqa.png ;;
    *) echo "unknown step $step (squad, boolq, cloze, cloze-equal, attention, depth, blend, hotpotqa, hotpot60-blend, gemma-squad, speed, frontier)" >&2; exit 1 ;;
  esac
done
