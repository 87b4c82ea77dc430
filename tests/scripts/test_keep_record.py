"""scripts/keep_record.py: a finished eval run kept as a record on purpose (summary as it is,
predictions gzip-compressed), never over an existing record without --force."""

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("keep_record", ROOT / "scripts" / "keep_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mode(f1: float, ttft: float) -> dict:
    return {"n": 2, "f1": f1, "em": f1, "retention": round(f1 / 50.0, 3), "retention_ci95": [0.5, 1.0],
            "ttft_median_ms": ttft}


def _run(folder: Path) -> Path:
    """A finished run folder as `cag eval` leaves it (store and plots included)."""
    (folder / "store").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"dataset": "squad", "model": "m", "seed": 0}, indent=2))
    (folder / "metrics.json").write_text(json.dumps({"task": "extractive", "model": "m", "examples": 2,
                                                      "modes": {"direct": _mode(50.0, 300.0),
                                                                "native": _mode(45.0, 100.0)}}))
    (folder / "report.md").write_text("# cag eval: squad\n")
    rows = [{"id": i, "mode": m, "score": 50.0, "prediction": "Zoë"} for i in "ab" for m in ("direct", "native")]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (folder / "retention.png").write_bytes(b"\x89PNG")
    return folder


def test_a_kept_run_holds_its_summary_as_it_is_and_its_predictions_compressed(tmp_path, capsys):
    run, records = _run(tmp_path / "runs" / "squad-2-m"), tmp_path / "records"
    _script().main([str(run), "--records", str(records)])
    record = records / "squad-2-m"  # NAME defaults to the run folder's name
    assert sorted(p.name for p in record.iterdir()) == ["config.json", "metrics.json", "predictions.jsonl.gz",
                                                        "report.md"]
    for name in ("config.json", "metrics.json", "report.md"):
        assert (record / name).read_bytes() == (run / name).read_bytes()
    assert gzip.decompress((record / "predictions.jsonl.gz").read_bytes()) == (run / "predictions.jsonl").read_bytes()
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == str(record)
    assert printed[1].startswith("| squad-2-m | m | 2 | direct 50.0 (1.0 [0.5, 1.0], TTFT x1.0) | native 45.0")
    assert "TTFT x3.0" in printed[1]
    # a record kept again from the record itself, under another name: the same bytes
    _script().keep(record, "again", records)
    assert (records / "again" / "predictions.jsonl.gz").read_bytes() == (record / "predictions.jsonl.gz").read_bytes()


def test_an_existing_record_is_replaced_only_with_force(tmp_path):
    run, records = _run(tmp_path / "run"), tmp_path / "records"
    keep = _script().main
    keep([str(run), "kept", "--records", str(records)])
    (records / "kept" / "NOTE.md").write_text("an older note")
    (run / "report.md").write_text("# cag eval: squad, again\n")
    with pytest.raises(SystemExit, match="kept exists: give --force to replace it"):
        keep([str(run), "kept", "--records", str(records)])
    assert (records / "kept" / "report.md").read_text() == "# cag eval: squad\n"
    keep([str(run), "kept", "--records", str(records), "--force"])
    assert (records / "kept" / "report.md").read_text() == "# cag eval: squad, again\n"
    assert not (records / "kept" / "NOTE.md").exists()  # replaced whole
    assert sorted(p.name for p in records.iterdir()) == ["kept"]  # no staging folder left


def test_an_unfinished_run_or_a_bad_name_writes_nothing(tmp_path):
    run, records = _run(tmp_path / "run"), tmp_path / "records"
    (run / "metrics.json").unlink()
    with pytest.raises(SystemExit, match="not a finished eval run: it lacks metrics.json"):
        _script().keep(run, "x", records)
    assert not records.exists()
    with pytest.raises(SystemExit, match="'a/b' is not a record name"):
        _script().keep(_run(tmp_path / "other"), "a/b", records)
    assert not records.exists()
