#!/usr/bin/env bash
# Steps key-loss, capacity (chunk attention) and cloze use `cag train` options removed since (they
# measured no gain): run them from commit 4ddb622.
# Issue 6 (translated caches that keep the facts): translators reading the target's own token
# embeddings, and the query-selected blend. Every command whose result is recorded in
# records/ (eval runs, training records) or quoted in the README. Run folders go under
# runs/ (not committed); `python scripts/keep_record.py --force RUN` copies a run's records. All at one
# thread per job, two jobs side by side on the 2-core CPU. Pass step names to run only some:
#   bash experiments/run_fact_evals.sh data probes train ship squad blend gemma hotpotqa boolq speed record frontier
# and the later steps (session 2026-12-02): selection gemma-blend longer
# (session 2026-12-02, second): hotpotqa-gemma squad-400 cloze-tune oracle
# (session 2026-12-02, third): key-loss
# (session 2026-12-02, fourth): key-loss again (its QA runs; runs/ had gone), capacity
# (session 2026-12-02, fifth): split query-twice
set -euo pipefail
cd "$(dirname "$0")/.."
CAG=${CAG:-.venv/bin/cag}
PY=${PY:-.venv/bin/python}
EVAL="$PY experiments/eval_with_selection.py eval"  # cag eval, with the experiment-only blend selections
Q=qwen2.5-coder-0.5b
G=gemma3-270m
E=records/eval
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(data probes train ship squad blend gemma hotpotqa boolq speed record frontier)

source experiments/translator_home.sh  # translator_home GENERATOR KIND=CHECKPOINT...
# fork SRC DST KEEP: a fork of a recorded run keeping KEEP's predictions (once)
fork() { [ -d "$2" ] || $PY experiments/fork_eval_run.py "$1" "$2" --keep "$3"; }
# ridge: no token embeddings and full width unless the arguments say otherwise (the last value counts)
ridge() { $CAG train --source smollm2-135m --kind ridge --steps 0 --target-embeddings 0 --token-rank 0 --no-install "$@"; }
mot() { $CAG train --source smollm2-135m --target-embeddings 2 --token-rank 512 --weights-dtype int8 --no-install "$@"; }
# squad_translated NAME: SQuAD 200, translated, with runs/train-qwen-mot-r512-NAME's MoT (a fork of
# the shipped MoT's run: direct, native, none kept; the encoder caches of the 400-question store)
squad_translated() {
  local h
  h=$(translator_home $Q mot=runs/train-qwen-mot-r512-$1/translator)
  fork $E/squad-200-qwen-mot-r512 runs/squad-200-qwen-mot-$1 direct,native,none
  CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated \
    --reuse-caches-from runs/squad-400-store --out runs/squad-200-qwen-mot-$1
}

for step in "${steps[@]}"; do
  case $step in
    data)  # the prepared windows (qwen 14.5 + 1.8 min, gemma ~7 min, qwen cloze 49 + 6 min), and ridge without embeddings
      ridge --target $Q --data runs/data-qwen-text --out runs/train-qwen-ridge-text
      ridge --target $G --windows 192 --data runs/data-gemma-text --out runs/train-gemma-ridge-emb0
      ridge --target $Q --continuation cloze --target-embeddings 2 --data runs/data-qwen-cloze \
        --out runs/train-qwen-ridge-emb2-cloze ;;
    probes)  # closed-form probes: how many token embeddings, source layers, projection widths
      for te in 1 2 4; do ridge --target $Q --target-embeddings $te --data runs/data-qwen-text --out runs/train-qwen-ridge-emb$te; done
      ridge --target $Q --target-embeddings 2 --source-layers 4 --data runs/data-qwen-text --out runs/train-qwen-ridge-emb2-src4
      for r in 64 128 256 512; do
        ridge --target $Q --target-embeddings 2 --token-rank $r --data runs/data-qwen-text --out runs/train-qwen-ridge-emb2-r$r
      done
      ridge --target $G --windows 192 --target-embeddings 2 --data runs/data-gemma-text --out runs/train-gemma-ridge-emb2
      ridge --target $G --windows 192 --target-embeddings 2 --token-rank 64 --data runs/data-gemma-text \
        --out runs/train-gemma-ridge-emb2-r64 ;;
    train)  # MoT: 4 experts top-2, 120 steps; full-width embeddings (not shippable: 64 MB) and the shipped form
      $CAG train --source smollm2-135m --target $Q --kind mot --target-embeddings 2 --token-rank 0 --no-install \
        --data runs/data-qwen-text --out runs/train-qwen-mot-emb2
      mot --target $Q --kind mot --data runs/data-qwen-text --out runs/train-qwen-mot-r512
      mot --target $G --kind mot --windows 192 --data runs/data-gemma-text --out runs/train-gemma-mot-r512
      mot --target $Q --kind mot --continuation cloze --data runs/data-qwen-cloze --out runs/train-qwen-mot-r512-cloze ;;
    ship)  # the full-width ridge maps stored in int8 (15.5 / 18.3 MiB): scripts/convert_translator.py
      mkdir -p runs/ship
      $PY scripts/convert_translator.py runs/train-qwen-ridge-emb2/translator runs/ship/qwen-ridge --dtype int8
      $PY scripts/convert_translator.py runs/train-gemma-ridge-emb2/translator runs/ship/gemma-ridge --dtype int8 ;;
    squad)  # SQuAD 200, qwen: forks of the recorded run (direct, native, none kept)
      GEN=$Q
      h=$(translator_home $GEN ridge=runs/train-qwen-ridge-emb2/translator)
      fork $E/squad-200-$Q runs/squad-200-qwen-ridge-emb direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,ridge --out runs/squad-200-qwen-ridge-emb
      h=$(translator_home $GEN mot=runs/train-qwen-mot-emb2/translator)
      fork $E/squad-200-$Q runs/squad-200-qwen-mot-emb2 direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated \
        --reuse-caches-from runs/squad-200-qwen-ridge-emb --out runs/squad-200-qwen-mot-emb2
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512/translator)  # the shipped MoT
      fork $E/squad-200-$Q runs/squad-200-qwen-mot-r512 direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated \
        --reuse-caches-from runs/squad-200-qwen-ridge-emb --out runs/squad-200-qwen-mot-r512 ;;
    blend)  # translated-blend with the full-width MoT: deviation probe vs query selection (summed over
      # every question token and layer: "queryall", the first version; then the shipped one)
      GEN=$Q
      h=$(translator_home $GEN mot=runs/train-qwen-mot-emb2/translator)
      for spec in deviation:0.15 query:0.15 query:0.3; do
        sel=${spec%%:*}; b=${spec#*:}; out=runs/squad-200-qwen-mot-emb2-blend-$sel-$b
        fork runs/squad-200-qwen-mot-emb2 $out direct,native,none,translated
        CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated-blend \
          --blend $b --blend-select $sel --out $out
      done
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512/translator)  # the shipped MoT, query selection
      for b in 0.15 0.25; do  # 0.25: the largest share still at >= 3x on 2,160 tokens (speed step)
        out=runs/squad-200-qwen-mot-r512-blend-query-$b
        fork runs/squad-200-qwen-mot-r512 $out direct,native,none,translated
        CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated-blend \
          --blend $b --blend-select query --out $out
      done ;;
    gemma)  # SQuAD 200, gemma (bf16): the shipped ridge and MoT
      GEN=$G
      h=$(translator_home $GEN ridge=runs/ship/gemma-ridge)
      fork $E/squad-200-$G runs/squad-200-gemma-ridge-emb direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $G --dtype bf16 --modes direct,ridge \
        --reuse-caches-from runs/squad-200-qwen-ridge-emb --out runs/squad-200-gemma-ridge-emb
      h=$(translator_home $GEN mot=runs/train-gemma-mot-r512/translator)
      fork $E/squad-200-$G runs/squad-200-gemma-mot-r512 direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $G --dtype bf16 --modes direct,translated \
        --reuse-caches-from runs/squad-200-qwen-ridge-emb --out runs/squad-200-gemma-mot-r512 ;;
    hotpotqa)  # HotpotQA 293, budget 2k, bf16: both shipped translators per pair
      GEN=$Q
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512/translator ridge=runs/ship/qwen-ridge)
      fork $E/hotpotqa-293-budget2k-$Q runs/hotpotqa-293-qwen-emb direct,native,none,native-blend
      CAG_HOME=$h $EVAL --dataset hotpotqa --context-budget 2048 --model $Q --dtype bf16 \
        --modes direct,ridge --blend-select deviation --out runs/hotpotqa-293-qwen-emb  # (native-blend kept: its setting)
      # translations not kept: each translator's translations of the 3,091 chunks cost 5-7 GB of disk
      CAG_HOME=$h $EVAL --dataset hotpotqa --context-budget 2048 --model $Q --dtype bf16 \
        --modes direct,translated --blend-select deviation --no-keep-translated --out runs/hotpotqa-293-qwen-emb
      GEN=$G
      h=$(translator_home $GEN mot=runs/train-gemma-mot-r512/translator ridge=runs/ship/gemma-ridge)
      fork $E/hotpotqa-293-budget2k-$G runs/hotpotqa-293-gemma-emb direct,native,none
      CAG_HOME=$h $EVAL --dataset hotpotqa --context-budget 2048 --model $G --dtype bf16 \
        --modes direct,translated --no-keep-translated --reuse-caches-from runs/hotpotqa-293-qwen-emb \
        --out runs/hotpotqa-293-gemma-emb ;;
    boolq)  # BoolQ 200 (fp32): both shipped translators per pair
      GEN=$Q
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512/translator ridge=runs/ship/qwen-ridge)
      fork $E/boolq-200-$Q runs/boolq-200-qwen-emb direct,native,none
      CAG_HOME=$h $EVAL --dataset boolq --limit 200 --model $Q --modes direct,translated,ridge --out runs/boolq-200-qwen-emb
      GEN=$G
      h=$(translator_home $GEN mot=runs/train-gemma-mot-r512/translator ridge=runs/ship/gemma-ridge)
      fork $E/boolq-200-$G runs/boolq-200-gemma-emb direct,native,none
      CAG_HOME=$h $EVAL --dataset boolq --limit 200 --model $G --modes direct,translated,ridge \
        --reuse-caches-from runs/boolq-200-qwen-emb --out runs/boolq-200-gemma-emb ;;
    speed)  # TTFT of every mode at 2,160 tokens with the shipped translators (one alternating run)
      GEN=$Q
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512/translator ridge=runs/ship/qwen-ridge)
      CAG_HOME=$h $PY benchmarks/bench_translated_speed.py --repeats 2 --blends 0.15,0.25,0.3,0.5 --selects deviation,query \
        --out records/translated_speed-$Q.json ;;
    frontier)  # retention on SQuAD (the shipped MoT's points on 400 questions, the others on 200)
      # against the speedup; the plot and its points
      $PY benchmarks/plot_frontier.py --speed records/translated_speed-$Q.json \
        --eval "SQuAD 400=$E/squad-400-qwen-mot-r512-blend-query-0.25" \
        --eval "SQuAD 400=$E/squad-400-qwen-mot-r512-blend-query-0.15" \
        --eval "SQuAD 200=$E/squad-200-qwen-mot-r512" \
        --eval "SQuAD 200, full-width MoT, query 0.3=$E/squad-200-qwen-mot-emb2-blend-query-0.3:translated=full-width MoT" \
        --eval "SQuAD 200, ridge=$E/squad-200-qwen-ridge-emb" \
        --eval "SQuAD 200, full-width MoT, deviation 0.15=$E/squad-200-qwen-mot-emb2-blend-deviation-0.15:translated=full-width MoT" ;;
    record)  # collect the runs, ship the translators, record their QA (metrics.qa, metrics.qa_blend)
      for run in runs/squad-200-qwen-{ridge-emb,mot-emb2,mot-r512} runs/squad-200-qwen-mot-emb2-blend-{deviation-0.15,queryall-0.15,query-0.15,query-0.3} \
                 runs/squad-200-qwen-mot-r512-blend-query-{0.15,0.25} runs/squad-200-gemma-{ridge-emb,mot-r512} \
                 runs/{hotpotqa-293,boolq-200}-{qwen,gemma}-emb; do
        $PY scripts/keep_record.py --force $run
      done
      for pair in $Q:qwen $G:gemma; do
        gen=${pair%%:*}; short=${pair#*:}; stem=translators/smollm2-135m__${gen}
        for ext in safetensors json; do
          cp runs/train-$short-mot-r512/translator.$ext ${stem}__mot.$ext
          cp runs/ship/$short-ridge.$ext ${stem}__ridge.$ext  # since moved: records/translators/ (make translators-extra)
        done
      done
      $PY benchmarks/record_translator_qa.py $E/squad-200-qwen-ridge-emb $E/squad-200-qwen-mot-r512 \
        $E/squad-200-qwen-mot-r512-blend-query-0.15 $E/squad-200-gemma-ridge-emb $E/squad-200-gemma-mot-r512 ;;
    selection)  # which tokens to recompute: gold-answer coverage on 150 passages outside the evaluated
      # 200 (records/blend_selection-*.json), then the best-covering rule on QA at 0.25
      $PY experiments/probe_blend_selection.py --count 150 --out records/blend_selection-$Q.json
      GEN=$Q
      h=$(translator_home $GEN mot=translators/smollm2-135m__${Q}__mot)  # the shipped MoT
      out=runs/squad-200-qwen-mot-r512-blend-query-span-0.25
      fork $E/squad-200-qwen-mot-r512 $out direct,native,none,translated
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated-blend \
        --blend 0.25 --blend-select query-span --out $out ;;
    gemma-blend)  # gemma's translated-blend with the shipped MoT, query selection
      GEN=$G
      h=$(translator_home $GEN mot=translators/smollm2-135m__${G}__mot)
      for b in 0.15 0.25; do
        out=runs/squad-200-gemma-mot-r512-blend-query-$b
        fork $E/squad-200-gemma-mot-r512 $out direct,native,none,translated
        CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $G --dtype bf16 --modes direct,translated-blend \
          --blend $b --blend-select query --out $out
      done ;;
    longer)  # the shipped MoT's recipe on every window the corpus holds (603 of 768 asked), 200 steps
      mot --target $Q --kind mot --windows 768 --steps 200 --eval-every 50 --data runs/data-qwen-text-768 \
        --out runs/train-qwen-mot-r512-w768
      GEN=$Q
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512-w768/translator)
      fork $E/squad-200-$Q runs/squad-200-qwen-mot-w768 direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated --out runs/squad-200-qwen-mot-w768
      out=runs/squad-200-qwen-mot-w768-blend-query-0.25
      fork runs/squad-200-qwen-mot-w768 $out direct,native,none,translated
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated-blend \
        --blend 0.25 --blend-select query --out $out
      mot --target $G --kind mot --windows 768 --steps 200 --eval-every 50 --data runs/data-gemma-text-768 \
        --out runs/train-gemma-mot-r512-w768
      GEN=$G
      h=$(translator_home $GEN mot=runs/train-gemma-mot-r512-w768/translator)
      fork $E/squad-200-$G runs/squad-200-gemma-mot-w768 direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $G --dtype bf16 --modes direct,translated \
        --reuse-caches-from runs/squad-200-qwen-mot-w768 --out runs/squad-200-gemma-mot-w768
      fork $E/boolq-200-gemma-emb runs/boolq-200-gemma-mot-w768 direct,native,none,ridge
      CAG_HOME=$h $EVAL --dataset boolq --limit 200 --model $G --modes direct,translated \
        --out runs/boolq-200-gemma-mot-w768
      # shipped as gemma's MoT: translators/, then its SQuAD retention recorded for --mode auto
      cp runs/train-gemma-mot-r512-w768/translator.safetensors translators/smollm2-135m__${G}__mot.safetensors
      cp runs/train-gemma-mot-r512-w768/translator.json translators/smollm2-135m__${G}__mot.json
      $PY benchmarks/record_translator_qa.py $E/squad-200-gemma-mot-w768 ;;
    hotpotqa-gemma)  # HotpotQA 293 with gemma's shipped MoT (603 windows); direct/native/none kept
      GEN=$G
      h=$(translator_home $GEN mot=translators/smollm2-135m__${G}__mot)
      fork $E/hotpotqa-293-budget2k-$G runs/hotpotqa-293-gemma-w768 direct,native,none
      CAG_HOME=$h $EVAL --dataset hotpotqa --context-budget 2048 --model $G --dtype bf16 \
        --modes direct,translated --no-keep-translated --out runs/hotpotqa-293-gemma-w768
      $PY scripts/keep_record.py --force runs/hotpotqa-293-gemma-w768 ;;
    squad-400)  # the frontier point (qwen, blend 0.25, query) on 200 more SQuAD questions: the run
      # extended to 400 (eval's seeded sample is prefix-stable), its 200 predictions kept
      GEN=$Q
      h=$(translator_home $GEN mot=translators/smollm2-135m__${Q}__mot)
      out=runs/squad-400-qwen-mot-r512-blend-query-0.25
      [ -d $out ] || $PY experiments/fork_eval_run.py $E/squad-200-qwen-mot-r512-blend-query-0.25 $out \
        --keep direct,translated,translated-blend --limit 400
      CAG_HOME=$h $EVAL --dataset squad --limit 400 --model $Q --modes direct,translated,translated-blend \
        --blend 0.25 --blend-select query --out $out
      # blend 0.15 (auto's recorded setting) on the same 400: its recorded 200 answers kept
      out15=runs/squad-400-qwen-mot-r512-blend-query-0.15
      if [ ! -d $out15 ]; then
        $PY experiments/fork_eval_run.py $out $out15 --keep direct,translated
        zgrep '"mode": "translated-blend"' $E/squad-200-qwen-mot-r512-blend-query-0.15/predictions.jsonl.gz >> $out15/predictions.jsonl
      fi
      CAG_HOME=$h $EVAL --dataset squad --limit 400 --model $Q --modes direct,translated,translated-blend \
        --blend 0.15 --blend-select query --out $out15
      $PY scripts/keep_record.py --force $out
      $PY scripts/keep_record.py --force $out15
      $PY benchmarks/record_translator_qa.py $E/squad-400-qwen-mot-r512-blend-query-0.15 ;;  # auto's records
    cloze-tune)  # the shipped qwen MoT trained on further on cloze continuations (a question about one
      # fact of the context + the generator's own answer read from the text): windows of the data step
      ridge --target $Q --continuation cloze --target-embeddings 2 --data runs/data-qwen-cloze \
        --out runs/train-qwen-ridge-emb2-cloze  # (prepares the windows; the cloze ridge fit)
      mot --target $Q --kind mot --continuation cloze --steps 0 --init translators/smollm2-135m__${Q}__mot \
        --data runs/data-qwen-cloze --out runs/train-qwen-mot-r512-cloze-start  # the start's cloze KL
      mot --target $Q --kind mot --continuation cloze --lr 5e-4 --init translators/smollm2-135m__${Q}__mot \
        --data runs/data-qwen-cloze --out runs/train-qwen-mot-r512-cloze-tuned
      GEN=$Q
      h=$(translator_home $GEN mot=runs/train-qwen-mot-r512-cloze-tuned/translator)
      fork $E/squad-200-qwen-mot-r512 runs/squad-200-qwen-mot-cloze-tuned direct,native,none
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated \
        --out runs/squad-200-qwen-mot-cloze-tuned
      # (its blend 0.25 run was stopped after full translation showed no change: not recorded)
      $PY scripts/keep_record.py --force runs/squad-200-qwen-mot-cloze-tuned
      $PY experiments/collect_training.py runs/train-qwen-ridge-emb2-cloze runs/train-qwen-mot-r512-cloze-start \
        runs/train-qwen-mot-r512-cloze-tuned ;;
    oracle)  # where full translation loses the facts: translated caches with some K/V made native
      GEN=$Q
      h=$(translator_home $GEN mot=translators/smollm2-135m__${Q}__mot)
      CAG_HOME=$h $PY experiments/probe_layer_oracle.py --count 80 --out records/layer_oracle-$Q.json
      CAG_HOME=$h $PY experiments/probe_layer_oracle.py --count 80 --only "native 16-23,native keys 16-23" --tag upper \
        --out records/layer_oracle-$Q-upper.json ;;
    key-loss)  # keys' reconstruction as the generator's queries see it (mot/training/query_metric.py): the
      # per-layer probe, then the shipped recipe with --key-loss query, from the ridge start and
      # continuing the shipped MoT; SQuAD 200 with the encoder caches of a 400-question store
      ridge --target $Q --target-embeddings 2 --token-rank 512 --data runs/data-qwen-text \
        --out runs/train-qwen-ridge-emb2-r512  # (prepares the windows; the MoT's ridge start)
      [ -d runs/squad-400-store ] || { $PY experiments/fork_eval_run.py $E/squad-400-qwen-mot-r512-blend-query-0.25 \
        runs/squad-400-store --keep direct,translated,translated-blend
        $EVAL --dataset squad --limit 400 --model $Q --modes direct,translated,translated-blend --blend 0.25 \
          --blend-select query --out runs/squad-400-store; }  # every answer kept: builds the store only
      # (80 steps, not the shipped 120: the session's time)
      mot --target $Q --kind mot --key-loss query --steps 80 --data runs/data-qwen-text --out runs/train-qwen-mot-r512-kq
      mot --target $Q --kind mot --key-loss query --steps 80 --lr 5e-4 --init translators/smollm2-135m__${Q}__mot \
        --data runs/data-qwen-text --out runs/train-qwen-mot-r512-kq-tuned
      $PY experiments/probe_key_error.py --data runs/data-qwen-text \
        --translator shipped-mot=translators/smollm2-135m__${Q}__mot --translator ridge=runs/train-qwen-ridge-emb2-r512/translator \
        --translator kq-mot=runs/train-qwen-mot-r512-kq/translator --translator kq-tuned=runs/train-qwen-mot-r512-kq-tuned/translator --out records/key_error-$Q.json
      for name in kq kq-tuned; do squad_translated $name; done ;;
    capacity)  # the shipped recipe (120 steps) with chunk attention in front of each layer's
      # mixtures, and with 8 experts instead of 4; SQuAD 200 translated
      for spec in "attn64:--attention-dim 64 --attention-heads 4" "e8:--experts 8"; do
        # shellcheck disable=SC2086  # the options split on purpose
        mot --target $Q --kind mot ${spec#*:} --data runs/data-qwen-text --out runs/train-qwen-mot-r512-${spec%%:*}
        squad_translated ${spec%%:*}
      done
      # chunk attention on 400: the shipped MoT's 400-question run's direct answers and its own
      # 200 translated ones kept, the next 200 translated
      out=runs/squad-400-qwen-mot-attn64
      if [ ! -d $out ]; then
        $PY experiments/fork_eval_run.py $E/squad-400-qwen-mot-r512-blend-query-0.25 $out --keep direct
        grep '"mode": "translated"' runs/squad-200-qwen-mot-attn64/predictions.jsonl >> $out/predictions.jsonl
      fi
      h=$(translator_home $Q mot=runs/train-qwen-mot-r512-attn64/translator)
      CAG_HOME=$h $EVAL --dataset squad --limit 400 --model $Q --modes direct,translated \
        --reuse-caches-from runs/squad-400-store --out $out ;;
    split)  # the split-layer hybrid: its bound (native K/V from layer S up: what a perfect residual
      # map would give), then the ridge residual map measured (experiments/probe_split_layer.py)
      GEN=$Q
      h=$(translator_home $GEN mot=translators/smollm2-135m__${Q}__mot)
      CAG_HOME=$h $PY experiments/probe_layer_oracle.py --count 80 --tag split \
        --only "native,native 12-23,native 16-23,native 18-23,native 20-23" --out records/layer_oracle-$Q-split.json
      CAG_HOME=$h $PY experiments/probe_split_layer.py --splits 16,18,20 --fit-chunks 256 --held-out 32 \
        --count 80 --run runs/probe-split --out records/split_layer-$Q.json ;;
    query-twice)  # blend selection query in two rounds (the question read again between), SQuAD 200 at 0.25
      GEN=$Q
      h=$(translator_home $GEN mot=translators/smollm2-135m__${Q}__mot)
      out=runs/squad-200-qwen-mot-r512-blend-query-twice-0.25
      fork $E/squad-200-qwen-mot-r512 $out direct,native,none,translated
      CAG_HOME=$h $EVAL --dataset squad --limit 200 --model $Q --modes direct,translated-blend \
        --blend 0.25 --blend-select query-twice --out $out
      $PY scripts/keep_record.py --force $out ;;
    *) echo "unknown step $step" >&2; exit 1 ;;
  esac
done
