"""The prepared GPU run (benchmarks/gpu/run.py) end to end in its smoke size on the CPU: tiny models
built in code, every step (convert, ingest, the asks through one `cag serve`, train, eval) run and
recorded in one table. A device session has minutes; this catches a broken script before one."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODES = ("direct", "native", "translated", "translated-blend", "none")


def test_the_smoke_run_completes_every_step_on_the_cpu(tmp_path, cag_home):
    out = tmp_path / "run"
    # --eval-workers 1: the eval in one process (its Ray path is tests/eval/test_ray_eval.py's)
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "run.py"), "--smoke", "--device", "cpu",
                             "--eval-workers", "1", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = json.loads((out / "table.json").read_text())
    for name in ("convert", "ingest", "ask", "train", "eval"):
        assert "error" not in table[name] and table[name]["seconds"] > 0, name
    asks = table["ask"]["modes"]
    assert set(asks) == set(MODES) and table["ask"]["server_ready_s"] > 0
    for mode, ask in asks.items():
        assert ask["first_ttft_ms"] > 0 and ask["ttft_ms"] > 0 and isinstance(ask["answer"], str), mode
    assert table["train"]["steps"] == 2 and table["train"]["heldout_kl"] >= 0
    assert table["eval"]["ray_gpus_per_worker"] is None and set(table["eval"]["modes"]) == set(MODES)
    assert all(m["f1"] is not None for m in table["eval"]["modes"].values())
    assert "total" in result.stdout and "the server loaded and warmed its models" in result.stdout
