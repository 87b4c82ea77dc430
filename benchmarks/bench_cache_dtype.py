"""Compressed chunk caches against fp16, side by side in one run: the same questions answered from
stores whose chunk caches are fp16 and each of `--cache-dtypes` (`cag eval --cache-dtype`), in the modes that
read stored caches (native: the generator's own; translated: the encoder's, through the MoT
translator), with the generator reading the text (direct) as every run's reference.

Per storage dtype and mode: score, retention against the same mode from fp16 caches (paired
bootstrap 95% interval over the questions), bytes stored per context token, and the mean time to
read a context's chunk caches (`load`).

Translated contexts are read twice: the first ask translates the encoder's stored caches (and
stores the translations, cag.kv.serde.derived_cache_dtype), a later ask reads those stored
translations ("translated, stored": the same questions asked again in a copy of the run folder
whose store holds them).

Usage: python benchmarks/bench_cache_dtype.py [--dataset squad] [--limit 100] [--dtype bf16]
           [--cache-dtypes int8,int4,int4k-int3v] [--context-budget N] [--out PATH]
Writes runs/benchmarks/cache_dtype-DATASET.json (or --out). Run folders go to
runs/cache-dtype-DATASET-DTYPE/ (resumable: a killed run continues).
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cag.store import Store
from eval.metrics import bootstrap_ratio_ci

ROOT = Path(__file__).resolve().parents[1]
COMPRESSED = ("int8", "int4", "int4k-int3v")
MODES = ("native", "translated")
STORED = "translated, stored"  # the translated mode's answers from the run's stored translations


def run_eval(args, cache_dtype: str, run: Path) -> None:
    command = [sys.executable, "-m", "cli", "eval", "--dataset", args.dataset, "--limit", str(args.limit),
               "--model", args.model, "--encoder", args.encoder, "--modes", ",".join(("direct",) + MODES),
               "--dtype", args.dtype, "--cache-dtype", cache_dtype, "--out", str(run)]
    if args.context_budget:
        command += ["--context-budget", str(args.context_budget)]
    print("$ " + " ".join(command[2:]), flush=True)
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def share_direct(source: Path, run: Path) -> None:
    """Direct answers read the text, whatever the caches' storage: the fp16 run's are copied into
    the other runs before they start, so they are made once (eval skips records it holds)."""
    if (run / "predictions.jsonl").is_file():
        return
    run.mkdir(parents=True, exist_ok=True)
    lines = [line for line in (source / "predictions.jsonl").read_text().splitlines()
             if json.loads(line)["mode"] == "direct"]
    (run / "predictions.jsonl").write_text("".join(line + "\n" for line in lines))


def ask_again(run: Path, again: Path) -> None:
    """A copy of `run` (its store now holds the translations) without its translated answers, so
    that the next eval in it answers them again from the stored translations."""
    if again.is_dir():
        return  # resumed: the copy was made (and perhaps partly answered) before
    shutil.copytree(run, again.with_suffix(".partial"))
    predictions = again.with_suffix(".partial") / "predictions.jsonl"
    kept = [line for line in predictions.read_text().splitlines() if json.loads(line)["mode"] != "translated"]
    predictions.write_text("".join(line + "\n" for line in kept))
    again.with_suffix(".partial").rename(again)


def translation_bytes_per_token(run: Path) -> float:
    """Bytes of the stored translations (every translated space) per distinct context token."""
    store = Store.open(run / "store")
    try:
        info = store.info()
        stored = sum(s["bytes"] for s in info["cache_spaces"] if s["role"] == "translated")
        return round(stored / max(info["distinct_tokens"], 1), 1)
    finally:
        store.close()


def records(run: Path) -> dict:
    """(id, mode) -> prediction record."""
    return {(r["id"], r["mode"]): r for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="squad")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--dtype", default="bf16", help="the generator's compute dtype")
    parser.add_argument("--context-budget", type=int, default=None, help="multi_doc: tokens of paragraphs")
    parser.add_argument("--cache-dtypes", default=",".join(COMPRESSED), help="compared with fp16, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/benchmarks/cache_dtype-DATASET.json)")
    args = parser.parse_args()
    dtypes = ("fp16", *(d for d in args.cache_dtypes.split(",") if d and d != "fp16"))
    tag = f"{args.dataset}{'-budget' + str(args.context_budget) if args.context_budget else ''}"
    runs = {d: ROOT / "runs" / f"cache-dtype-{tag}-{d}" for d in dtypes}
    started = time.perf_counter()
    again = {d: run.with_name(run.name + "-again") for d, run in runs.items()}
    for dtype in dtypes:
        if dtype != "fp16":
            share_direct(runs["fp16"], runs[dtype])
        run_eval(args, dtype, runs[dtype])
        ask_again(runs[dtype], again[dtype])
        run_eval(args, dtype, again[dtype])
    held = {d: records(runs[d]) for d in dtypes}
    for d in dtypes:  # the stored translations' answers, under a mode name of their own
        held[d].update({(i, STORED): r for (i, m), r in records(again[d]).items() if m == "translated"})
    ids = sorted({i for (i, m) in held["fp16"] if m == "direct"})
    result = {"date": time.strftime("%Y-%m-%d"), "dataset": args.dataset, "context_budget": args.context_budget,
              "questions": len(ids), "model": args.model, "encoder": args.encoder, "compute_dtype": args.dtype,
              "runs": {d: str(runs[d].relative_to(ROOT)) for d in dtypes}, "modes": {}}
    for dtype in dtypes:
        metrics = json.loads((runs[dtype] / "metrics.json").read_text())
        metrics["modes"][STORED] = json.loads((again[dtype] / "metrics.json").read_text())["modes"]["translated"]
        for mode in (*MODES, STORED):
            rows = [held[dtype][(i, mode)] for i in ids]
            base = [held["fp16"][(i, mode)]["score"] for i in ids]
            ratio, low, high = bootstrap_ratio_ci([r["score"] for r in rows], base)
            result["modes"][f"{mode} {dtype}"] = {
                "score": round(statistics.fmean(r["score"] for r in rows), 2),
                "retention_vs_direct": metrics["modes"][mode]["retention"],
                "retention_vs_fp16": round(ratio, 3), "retention_vs_fp16_ci95": [round(low, 3), round(high, 3)],
                "same_answer_as_fp16": sum(r["prediction"] == held["fp16"][(i, mode)]["prediction"]
                                           for i, r in zip(ids, rows)),
                "bytes_per_context_token": metrics["modes"][mode]["bytes_stored_per_context_token"],
                "load_ms_mean": round(statistics.fmean(r["timings_ms"].get("load", 0.0) for r in rows), 1),
                "translate_ms_mean": round(statistics.fmean(r["timings_ms"].get("translate", 0.0) for r in rows), 1)}
        result["modes"][f"{STORED} {dtype}"]["translation_bytes_per_context_token"] = \
            translation_bytes_per_token(again[dtype])
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = args.out or ROOT / "runs" / "benchmarks" / f"cache_dtype-{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"{'mode':32} {'score':>6} {'vs fp16 [95% CI]':>24} {'same':>5} {'bytes/token':>12} {'load ms':>8}")
    for name, m in result["modes"].items():
        ci = m["retention_vs_fp16_ci95"]
        print(f"{name:32} {m['score']:>6} {m['retention_vs_fp16']:>8} [{ci[0]}, {ci[1]}] {m['same_answer_as_fp16']:>5} "
              f"{m['bytes_per_context_token']!s:>12} {m['load_ms_mean']:>8}")


if __name__ == "__main__":
    main()
