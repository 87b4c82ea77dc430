"""Reader adapters' recorded QA retention, written into the adapter's JSON: `metrics.qa` from its
full reader mode (`native+reader` or `translated+reader`) and `metrics.qa_blend` from a blended one
(`translated-blend+reader`), each beside its base mode's retention on the same questions and the
paired difference; `ask --mode auto` reads them (cag.modes.reader.native_choice, mot.modes.gate).
`scripts/record_reader_qa.py` writes them from a finished eval run."""

import json
from pathlib import Path

from cag.modes import ReaderMode, get_mode


def reader_qa_results(run: Path, reads: str, run_name: str | None = None, kind: str = "lora") -> dict:
    """metrics key ("qa" / "qa_blend") -> the record of the `kind` reader modes in `run` reading
    `reads` ("native" or "encoder" caches, cag.modes.ContextMode.reads)."""
    config = json.loads((run / "config.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    held, results = metrics["modes"], {}
    for mode, scores in held.items():
        reader = get_mode(mode)
        if not isinstance(reader, ReaderMode) or reader.kind != kind or reader.reads != reads:
            continue
        base = reader.base_name
        if base not in held:
            continue
        score = "f1" if "f1" in scores else "accuracy"
        record = {"dataset": config["dataset"], "questions": metrics["examples"], "seed": config["seed"],
                  "setting": metrics["setting"], "mode": mode, "base_mode": base,
                  "direct": held["direct"][score], score: scores[score], "retention": scores["retention"],
                  "retention_ci95": scores["retention_ci95"], "base_retention": held[base]["retention"],
                  "difference": metrics.get("paired_differences", {}).get(f"{mode} - {base}"),
                  "run": run_name or str(run)}
        if get_mode(mode).recomputes:
            record.update(blend=config["blend"], blend_select=config["blend_select"])
        results["qa_blend" if get_mode(mode).recomputes else "qa"] = record
    return results
