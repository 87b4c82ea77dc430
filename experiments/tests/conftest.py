"""Experiment tests (not in the default run): `pytest experiments/tests`. The experiments are
scripts beside this folder; the product's test helpers for blend live in tests/kv."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "experiments", ROOT / "tests" / "kv"):
    sys.path.insert(0, str(folder))
