"""What keeping translations in int8 buys: the same questions answered from stored translations
rounded again to the store's own 4-bit storage, beside the int8 ones the store keeps.

Takes the "-again" run folder of `benchmarks/bench_cache_dtype.py` for a 4-bit storage (its store
holds the int8 translations its translated answers read), copies it, rewrites every stored
translation in the copy at `--dtype` through the store's own serialization, and answers the
translated mode again there (`cag eval` with the run's own settings). Retention of both against the
fp16 store's translated answers, paired over the questions.

    python experiments/stored_translation_dtype.py runs/cache-dtype-squad-int4k-int3v-again \
        runs/cache-dtype-squad-fp16 [--dtype int4k-int3v] [--out PATH]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cag.kv.serde import load_chunk_cache, save_chunk_cache
from eval.metrics import bootstrap_ratio_ci

ROOT = Path(__file__).resolve().parents[1]


def translated_answers(run: Path) -> dict:
    """id -> the run's translated-mode prediction record."""
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in rows if r["mode"] == "translated"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("again", type=Path, help="bench_cache_dtype's -again run of a 4-bit storage")
    parser.add_argument("fp16", type=Path, help="the same bench's fp16 run (the reference)")
    parser.add_argument("--dtype", default="int4k-int3v", help="storage the translations are rewritten in")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    copy = args.again.with_name(f"{args.again.name}-translations-{args.dtype}")
    if not copy.is_dir():
        shutil.copytree(args.again, copy)
        spaces = {p.parent.name for p in (copy / "store" / "caches").glob("*/model.json")
                  if json.loads(p.read_text())["role"] == "translated"}
        for space in spaces:
            for path in (copy / "store" / "caches" / space).rglob("*.safetensors"):
                save_chunk_cache(load_chunk_cache(path), path, args.dtype)
        predictions = copy / "predictions.jsonl"
        kept = [line for line in predictions.read_text().splitlines() if json.loads(line)["mode"] != "translated"]
        predictions.write_text("".join(line + "\n" for line in kept))
    config = json.loads((args.again / "config.json").read_text())
    command = [sys.executable, "-m", "cli", "eval", "--dataset", config["dataset"], "--limit", str(config["limit"]),
               "--model", config["model"], "--encoder", config["encoder"], "--modes", ",".join(config["modes"]),
               "--dtype", config["dtype"], "--cache-dtype", config["cache_dtype"], "--out", str(copy)]
    if config.get("context_budget"):
        command += ["--context-budget", str(config["context_budget"])]
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    reference = translated_answers(args.fp16)
    ids = sorted(reference)
    result = {"date": time.strftime("%Y-%m-%d"), "dataset": config["dataset"], "questions": len(reference),
              "store": config["cache_dtype"], "reference": str(args.fp16), "translations": {}}
    for name, run in (("int8 (kept by the store)", args.again), (args.dtype, copy)):
        got = translated_answers(run)
        ratio, low, high = bootstrap_ratio_ci([got[i]["score"] for i in ids], [reference[i]["score"] for i in ids])
        result["translations"][name] = {
            "run": str(run), "score": round(statistics.fmean(got[i]["score"] for i in ids), 2),
            "retention_vs_fp16": round(ratio, 3), "retention_vs_fp16_ci95": [round(low, 3), round(high, 3)],
            "same_answer_as_fp16": sum(got[i]["prediction"] == reference[i]["prediction"] for i in ids),
            "translate_ms_mean": round(statistics.fmean(got[i]["timings_ms"].get("translate", 0.0) for i in ids), 1)}
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = args.out or ROOT / "runs" / "probes" / f"stored_translation_dtype-{config['dataset']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name, t in result["translations"].items():
        print(f"{name:28s} {t['score']:6.2f}  {t['retention_vs_fp16']} {t['retention_vs_fp16_ci95']}  "
              f"same {t['same_answer_as_fp16']}  translate {t['translate_ms_mean']} ms")


if __name__ == "__main__":
    main()
