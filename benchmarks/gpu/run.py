"""The prepared GPU run: one script, under 8 minutes on one large GPU, that exercises every part of
cag on the device and prints one table.

    ingest the sample corpus (encoder + the generator's own caches) on the device
    ask one question in every mode (one-shot: TTFT with the warm-up apart)
    train a translator for 50 steps (a small run, not a shipped recipe)
    evaluate 100 SQuAD questions: direct, native, translated, translated-blend, none

Usage: python benchmarks/gpu/run.py [--device cuda] [--dry-run] [--out DIR]
  --dry-run   the same steps on the CPU, each made tiny (3 questions, 2 steps): a check that the
              script and the `--device` paths work where no GPU is
  --encoder / --generator   model aliases or .gguf paths (a GPU machine without PyPI access gets
              the GGUF files carried, see benchmarks/gpu/README.md)
Writes OUT/table.json and prints the table.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "How long can the European lobster grow?"
MODES = ("direct", "native", "translated", "translated-blend", "none")


def cag(*args, capture: bool = False) -> subprocess.CompletedProcess:
    """Run one `cag` command (this checkout's code) and fail loudly."""
    command = [sys.executable, "-m", "cli", *map(str, args)]
    print("$ cag " + " ".join(map(str, args)), flush=True)
    return subprocess.run(command, cwd=ROOT, check=True, text=True, capture_output=capture)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, tiny")
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-run")
    args = parser.parse_args()
    device = "cpu" if args.dry_run else args.device
    dtype = "fp32" if device == "cpu" else "bf16"
    questions, steps, windows = (3, 2, 4) if args.dry_run else (100, 50, 128)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    table, started = {"device": device, "dry_run": args.dry_run}, time.perf_counter()
    common = ["--device", device, "--dtype", dtype]

    t0 = time.perf_counter()
    cag("ingest", ROOT / "samples" / "corpus", "--store", out / "store", "--encoder", args.encoder,
        "--also-for", args.generator, *common)
    table["ingest_s"] = round(time.perf_counter() - t0, 1)

    table["ask"] = {}
    for mode in MODES:
        result = cag("ask", QUESTION, "--store", out / "store", "--model", args.generator, "--mode", mode,
                     "--json", "--max-new-tokens", 16, *common, capture=True)
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        table["ask"][mode] = {"answer": answer["answer"], "ttft_ms": answer["timings_ms"]["ttft"],
                              "warmup_ms": answer["timings_ms"]["warmup"]}

    t0 = time.perf_counter()
    cag("train", "--source", args.encoder, "--target", args.generator, "--steps", steps, "--windows", windows,
        "--heldout-windows", min(windows, 16), "--device", device, "--no-install", "--out", out / "train")
    record = json.loads((out / "train" / "translator.json").read_text())
    table["train"] = {"steps": steps, "seconds": round(time.perf_counter() - t0, 1),
                      "heldout": record["spec"]["metrics"]["heldout"]}

    t0 = time.perf_counter()
    cag("eval", "--dataset", "squad", "--limit", questions, "--model", args.generator, "--encoder", args.encoder,
        "--modes", ",".join(MODES), "--blend", 0.25, "--device", device, "--dtype", dtype, "--out", out / "eval")
    metrics = json.loads((out / "eval" / "metrics.json").read_text())["modes"]
    table["eval"] = {"questions": questions, "seconds": round(time.perf_counter() - t0, 1),
                     "modes": {m: {k: metrics[m][k] for k in ("f1", "retention", "retention_ci95", "ttft_median_ms")}
                               for m in metrics}}
    table["total_s"] = round(time.perf_counter() - started, 1)
    (out / "table.json").write_text(json.dumps(table, indent=2))
    print_table(table)


def print_table(table: dict) -> None:
    print(f"\ndevice {table['device']}{' (dry run)' if table['dry_run'] else ''}: total {table['total_s']} s, "
          f"ingest {table['ingest_s']} s, train {table['train']['seconds']} s, eval {table['eval']['seconds']} s "
          f"({table['eval']['questions']} SQuAD questions)")
    print(f"{'mode':18} {'ask TTFT ms':>12} {'SQuAD F1':>9} {'retention [95% CI]':>24} {'eval TTFT ms':>13}")
    for mode in MODES:
        ask, ev = table["ask"][mode], table["eval"]["modes"].get(mode, {})
        low, high = ev.get("retention_ci95") or (None, None)
        retention = f"{ev.get('retention')} [{low}, {high}]"
        print(f"{mode:18} {ask['ttft_ms']:>12} {ev.get('f1')!s:>9} {retention:>24} {ev.get('ttft_median_ms')!s:>13}")


if __name__ == "__main__":
    main()
