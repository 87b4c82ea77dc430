#!/usr/bin/env bash
# The prepared GPU run (benchmarks/gpu/run.py): set up on the GPU machine, then run; under 8 minutes
# on one large GPU. See benchmarks/gpu/README.md for what must travel to a machine without network.
#   bash benchmarks/gpu/run.sh              on a machine whose python3 has a CUDA torch
#   bash benchmarks/gpu/run.sh --dry-run    here, on the CPU: the same steps, each tiny
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--dry-run" ]; then
    exec "${PYTHON:-.venv/bin/python}" benchmarks/gpu/run.py --dry-run "${@:2}"
fi
PY=${PYTHON:-python3}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || { echo "run.sh: $PY's torch sees no CUDA GPU (use --dry-run on a CPU machine)" >&2; exit 1; }
# cag's other dependencies: carried wheels where the machine has no network (.whl/), else PyPI;
# the machine's own torch is kept either way
if [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
else
    "$PY" -m pip install -q -e . --no-deps && "$PY" -m pip install -q gguf faiss-cpu llama-index-core typer rich
fi
# the models: GGUF files carried in parts (.gguf-parts/NAME.gguf.partNN, NAME.gguf.sha256), joined once
encoder=smollm2-135m generator=qwen2.5-coder-0.5b
if [ -d .gguf-parts ]; then
    mkdir -p /tmp/gguf
    for sum in .gguf-parts/*.sha256; do
        name=$(basename "$sum" .sha256)
        [ -f "/tmp/gguf/$name" ] || cat .gguf-parts/"$name".part* > "/tmp/gguf/$name"
        echo "$(cat "$sum")  /tmp/gguf/$name" | sha256sum -c --quiet
    done
    encoder=/tmp/gguf/smollm2-135m.gguf generator=/tmp/gguf/qwen2.5-coder-0.5b.gguf
fi
exec "$PY" benchmarks/gpu/run.py --device cuda --encoder "$encoder" --generator "$generator" "$@"
