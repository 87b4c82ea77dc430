#!/usr/bin/env bash
# Reader adapters (docs/readers.md): every command whose result is recorded in records/ and quoted
# in docs/results.md. One job at a time, one thread (the machine is shared: more threads than free
# cores made a 0.5B prefill 3-4x slower here). Run folders go under runs/; readers are shipped into
# readers/ (where ask and eval find them) instead of being installed into the shared $CAG_HOME.
# Pass step names to run only some:
#   bash experiments/run_reader_evals.sh train-native train-translated train-links hotpotqa squad speed record
#     train-native-80 hotpotqa20 hotpotqa-native
# (in this order: train-native-80 ships over train-native's reader, which the steps before it read)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CAG="$PY -m cli"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
Q=qwen2.5-coder-0.5b
DATA=runs/reader-data  # prepared windows shared by the trainings (the teacher is the same)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(train-native train-translated train-links hotpotqa squad speed record
                                 train-native-80 hotpotqa20 hotpotqa-native)

ship() {  # ship RUN STEM: the run's reader into readers/STEM.{safetensors,json}
  mkdir -p readers
  cp "$1/reader.safetensors" "readers/$2.safetensors"
  cp "$1/reader.json" "readers/$2.json"
}
MODES=direct,native,native+reader,native+links,none,translated,translated+reader,translated-blend,translated-blend+reader
NATIVE_MODES=direct,native,native+reader,native+links,none  # the native readers against their base mode

for step in "${steps[@]}"; do
  case $step in
    train-native)
      $CAG train-reader --reads native --data $DATA --out runs/train-reader-native --no-install
      ship runs/train-reader-native ${Q}__native__reader ;;
    train-native-80)  # the native reader of hotpotqa20 and hotpotqa-native: 80 steps on the same windows
      $CAG train-reader --reads native --steps 80 --eval-every 20 --checkpoint-every 20 --data $DATA \
        --out runs/train-reader-native-80 --no-install
      ship runs/train-reader-native-80 ${Q}__native__reader ;;
    train-translated)
      $CAG train-reader --reads translated --data $DATA --out runs/train-reader-translated --no-install
      ship runs/train-reader-translated smollm2-135m__${Q}__mot__reader ;;
    train-links)
      $CAG train-reader --reads native --adapter links --link-tokens 4 --lr 3e-3 --data $DATA \
        --out runs/train-reader-native-links --no-install
      ship runs/train-reader-native-links ${Q}__native__links ;;
    hotpotqa)  # ten paragraphs, about 1,350 generator tokens; a run folder takes modes added later
      $CAG eval --dataset hotpotqa --context-budget 2048 --limit 100 --dtype bf16 --blend 0.25 --modes $MODES \
        --out runs/reader-hotpotqa-100 ;;
    hotpotqa20)  # twenty paragraphs (its own ten and ten of other questions), about 2,700 tokens;
      # recorded: records/eval/hotpotqa20-100-budget4k-readers (train-native-80 and train-links readers)
      $CAG eval --dataset hotpotqa-20 --context-budget 4096 --limit 100 --dtype bf16 --blend 0.25 \
        --modes $NATIVE_MODES,translated,translated-blend \
        --out runs/reader-hotpotqa20-100 ;;
    hotpotqa20-more)  # recorded: records/eval/hotpotqa20-182-budget4k-native-reader-retrained (the
      # train-native-80 reader trained again; stopped at 182 of 200 and its config limit set to 182)
      $CAG eval --dataset hotpotqa-20 --context-budget 4096 --limit 200 --dtype bf16 \
        --modes direct,native,native+reader --out runs/reader-hotpotqa20-200 ;;
    hotpotqa-native)  # the same two native readers on ten paragraphs
      $CAG eval --dataset hotpotqa --context-budget 2048 --limit 100 --dtype bf16 \
        --modes $NATIVE_MODES --out runs/reader-hotpotqa-100-native ;;
    squad)
      $CAG eval --dataset squad --limit 200 --dtype bf16 --blend 0.25 --modes $MODES --out runs/reader-squad-200 ;;
    speed)
      $PY benchmarks/bench_translated_speed.py --readers --blends 0.25 --repeats 3 \
        --out records/translated_speed_readers-$Q.json ;;
    record)
      $PY scripts/record_reader_qa.py runs/reader-hotpotqa-100 --reader readers/${Q}__native__reader.safetensors
      $PY scripts/record_reader_qa.py runs/reader-squad-200 --reader readers/smollm2-135m__${Q}__mot__reader.safetensors ;;
    *) echo "unknown step $step" >&2; exit 1 ;;
  esac
done
