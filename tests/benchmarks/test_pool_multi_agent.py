"""Pooling the multi-agent case study's records: each record's answered questions (the first `n` lines of
its predictions, plain or gzip-compressed as kept in records/), the modes every record asked, and a
refusal when two records share a question."""

import importlib
import json
import sys
from pathlib import Path

import pytest

from eval.jsonl import write_gz

ROOT = Path(__file__).resolve().parents[2]


def _row(question_id: str, f1: dict) -> dict:
    modes = {m: {"f1": v, "em": float(v == 100.0), "ttft_ms": 100.0 if m == "direct" else 25.0,
                 "history_tokens": 1000} for m, v in f1.items()}
    modes["translated"]["ttft_again_ms"] = 10.0
    return {"id": question_id, "a": {"note_tokens": 40, "prompt_tokens": 1400, "ttft_ms": 50.0}, "modes": modes}


def _record(folder: Path, name: str, rows: list[dict], n: int, compressed: bool = False) -> Path:
    predictions = folder / f"{name}.predictions.jsonl{'.gz' if compressed else ''}"
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if compressed:
        write_gz(predictions, text)
    else:
        predictions.write_text(text)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"dataset": name, "n": n, "runs": [], "predictions": predictions.name}))
    return path


def _benchmark(name: str):
    """A module of benchmarks/ (its scripts import their neighbours), imported in this process."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _pool(*args) -> None:
    _benchmark("pool_multi_agent").main([str(a) for a in args])


def test_pooling_covers_each_records_answered_questions_in_the_common_modes(tmp_path):
    first = _record(tmp_path, "first", [
        _row("a1", {"translated": 50.0, "translated-blend 0.1": 0.0, "direct": 100.0, "none": 0.0}),
        _row("a2", {"translated": 0.0, "translated-blend 0.1": 0.0, "direct": 100.0, "none": 0.0}),
        _row("a3", {"translated": 100.0, "translated-blend 0.1": 100.0, "direct": 0.0, "none": 0.0}),  # past n
    ], n=2)
    second = _record(tmp_path, "second", [
        _row("b1", {"translated": 100.0, "direct": 100.0, "none": 100.0}),
    ], n=1, compressed=True)  # as records/ keeps them
    out = tmp_path / "pooled.json"
    _pool(first, second, "--record", out)
    pooled = json.loads(out.read_text())
    assert pooled["n"] == 3
    assert set(pooled["modes"]) == {"translated", "direct", "none"}  # the blend share only the first asked
    assert pooled["modes"]["translated"]["f1"][0] == 50.0  # (50 + 0 + 100) / 3: a3 is not counted
    assert pooled["modes"]["none"]["f1"][0] == round(100 / 3, 2)
    assert pooled["f1_retention_ci95"]["translated / direct"][0] == 0.5
    assert [s["n"] for s in pooled["pooled_from"]] == [2, 1]


def test_records_that_share_a_question_are_refused(tmp_path):
    row = _row("same", {"translated": 50.0, "direct": 100.0, "none": 0.0})
    first = _record(tmp_path, "first", [row], n=1)
    second = _record(tmp_path, "second", [row], n=1)
    with pytest.raises(SystemExit, match="share questions"):
        _pool(first, second, "--record", tmp_path / "pooled.json")
    assert not (tmp_path / "pooled.json").exists()


def test_a_run_killed_before_its_record_is_listed_for_the_questions_it_answered(tmp_path):
    runs_so_far = _benchmark("bench_multi_agent").runs_so_far
    record = tmp_path / "record.json"
    assert runs_so_far(record, 0) == []
    killed = runs_so_far(record, 127)  # no record: a first run was killed after 127 questions
    assert [r["questions_up_to"] for r in killed] == [127] and killed[0]["seconds"] is None
    record.write_text(json.dumps({"runs": [{"date": "2026-12-05", "questions_up_to": 200, "seconds": 5.0}]}))
    assert [r["questions_up_to"] for r in runs_so_far(record, 200)] == [200]
    assert [r["questions_up_to"] for r in runs_so_far(record, 250)] == [200, 250]  # a later run killed too
