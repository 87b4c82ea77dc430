"""The run records under records/ as scripts/keep_record.py lays them out: each eval record a
readable summary plus its predictions gzip-compressed, no plots, and the folder within its budget."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "records"
BUDGET_BYTES = 10 * 10**6  # records/ at most 10 MB


def test_every_eval_record_holds_its_summary_and_compressed_predictions():
    runs = sorted(p for p in (RECORDS / "eval").iterdir() if p.is_dir())
    assert len(runs) > 50
    incomplete = [f"{run.name}: lacks {name}" for run in runs
                  for name in ("config.json", "metrics.json", "report.md", "predictions.jsonl.gz")
                  if not (run / name).is_file()]
    assert not incomplete, "\n".join(incomplete)


def test_no_record_keeps_plain_predictions_or_per_run_plots():
    plain = [str(p.relative_to(ROOT)) for p in RECORDS.rglob("*predictions.jsonl")]
    plots = [str(p.relative_to(ROOT)) for p in (RECORDS / "eval").rglob("*.png")]
    assert not plain and not plots, f"compress with scripts/keep_record.py: {plain + plots}"


def test_the_records_stay_within_their_budget():
    size = sum(p.stat().st_size for p in RECORDS.rglob("*") if p.is_file())
    assert size <= BUDGET_BYTES, f"records/ holds {size:,} bytes, over {BUDGET_BYTES:,}"
