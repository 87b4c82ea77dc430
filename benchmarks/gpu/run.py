"""The prepared GPU run: one script, sized for 8 minutes on one large GPU (about 15 measured on an
H200), that exercises every part of cag on the device and prints one table.

    ingest the sample corpus (encoder + the generator's own caches) on the device
    ask one question in every mode (one-shot: TTFT with the warm-up apart; translated uses the
        shipped translator, found by fingerprint)
    train a translator for 50 steps (a small run, not a shipped recipe)
    evaluate 100 SQuAD questions: direct, native, translated, translated-blend, none

Usage: python benchmarks/gpu/run.py [--device cuda] [--dry-run | --smoke] [--out DIR]
  --dry-run   the same steps on the CPU, each made tiny (3 questions, 2 steps): a check that the
              script and the `--device` paths work where no GPU is
  --smoke     tiny random models built in code, tiny steps, on --device: the device paths checked
              in seconds before any real model has arrived (its translator is trained first and
              installed, since none is shipped for tiny models)
  --encoder / --generator   model aliases or .gguf paths (a GPU machine without PyPI access gets
              the GGUF files carried, see benchmarks/gpu/README.md)
A step that fails is recorded with its exit status and the run goes on, so one table always comes
out. Writes OUT/table.json and prints the table; exits 1 if any step failed.
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "How long can the European lobster grow?"
MODES = ("direct", "native", "translated", "translated-blend", "none")


class StepFailed(Exception):
    pass


def cag(*args, capture: bool = False) -> subprocess.CompletedProcess:
    """Run one `cag` command (this checkout's code); its output streams to ours."""
    command = [sys.executable, "-m", "cli", *map(str, args)]
    print(f"[{time.strftime('%H:%M:%S')}] $ cag " + " ".join(map(str, args)), flush=True)
    result = subprocess.run(command, cwd=ROOT, text=True, stdout=subprocess.PIPE if capture else None)
    if result.returncode != 0:
        raise StepFailed(f"`cag {args[0]}` exited with {result.returncode} (its error is in the log above)")
    return result


def step(table: dict, name: str, work) -> None:
    """Run one step, timing it; a failure is recorded in the table instead of ending the run."""
    t0 = time.perf_counter()
    try:
        table[name] = work()
    except (StepFailed, OSError, KeyError, ValueError) as exc:
        table[name] = {"error": str(exc)}
        print(f"step {name} FAILED: {exc}", file=sys.stderr, flush=True)
    table[name]["seconds"] = round(time.perf_counter() - t0, 1)


def environment(device: str) -> dict:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__}
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def tiny_models(folder: Path) -> tuple[str, str]:
    """A tiny llama encoder and a tiny qwen2 generator, saved as folders (`cag` loads folders)."""
    sys.path.insert(0, str(ROOT))
    from cag.testing import save_tiny_model

    # room for the sample corpus's retrieved context (about 800 tokens of the tiny tokenizer)
    save_tiny_model(folder / "tiny-llama", "llama", seed=1, max_position_embeddings=4096)
    save_tiny_model(folder / "tiny-qwen2", "qwen2", seed=2, max_position_embeddings=4096)
    return str(folder / "tiny-llama"), str(folder / "tiny-qwen2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, tiny")
    size.add_argument("--smoke", action="store_true", help="tiny models built in code, tiny steps, on --device")
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--questions", type=int, default=100, help="SQuAD questions evaluated")
    parser.add_argument("--steps", type=int, default=50, help="translator training steps")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-run")
    args = parser.parse_args()
    device = "cpu" if args.dry_run else args.device
    dtype = "fp32" if device == "cpu" else "bf16"
    tiny = args.dry_run or args.smoke
    questions, steps, windows = (3, 2, 4) if tiny else (args.questions, args.steps, 128)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    encoder, generator = tiny_models(out / "models") if args.smoke else (args.encoder, args.generator)
    table = {"device": device, "dry_run": args.dry_run, "smoke": args.smoke, "encoder": encoder,
             "generator": generator, "environment": environment(device)}
    started = time.perf_counter()
    common = ["--device", device, "--dtype", dtype]

    def ingest() -> dict:
        cag("ingest", ROOT / "samples" / "corpus", "--store", out / "store", "--encoder", encoder,
            "--also-for", generator, *common)
        return {}

    def ask() -> dict:
        answers = {}
        for mode in MODES:
            try:
                result = cag("ask", QUESTION, "--store", out / "store", "--model", generator, "--mode", mode,
                             "--json", "--max-new-tokens", 16, *common, capture=True)
                answer = json.loads(result.stdout.strip().splitlines()[-1])
                answers[mode] = {"answer": answer["answer"], "ttft_ms": answer["timings_ms"]["ttft"],
                                 "warmup_ms": answer["timings_ms"]["warmup"]}
            except StepFailed as exc:
                answers[mode] = {"error": str(exc)}
        return {"modes": answers}

    def train() -> dict:
        cag("train", "--source", encoder, "--target", generator, "--steps", steps, "--windows", windows,
            "--heldout-windows", min(windows, 16), "--device", device,
            "--install" if args.smoke else "--no-install", "--out", out / "train")
        record = json.loads((out / "train" / "translator.json").read_text())
        heldout = record["spec"]["metrics"]["heldout"]["full"]
        return {"steps": steps, "windows": windows, "heldout_kl": heldout["kl"], "heldout_top1": heldout["top1"]}

    def evaluate() -> dict:
        cag("eval", "--dataset", "squad", "--limit", questions, "--model", generator, "--encoder", encoder,
            "--modes", ",".join(MODES), "--blend", 0.25, "--device", device, "--dtype", dtype,
            "--out", out / "eval")
        metrics = json.loads((out / "eval" / "metrics.json").read_text())["modes"]
        return {"questions": questions,
                "modes": {m: {k: metrics[m].get(k) for k in ("f1", "retention", "retention_ci95", "ttft_median_ms")}
                          for m in metrics}}

    # tiny models have no shipped translator: train (and install) theirs before asking
    order = ([("ingest", ingest), ("train", train), ("ask", ask), ("eval", evaluate)] if args.smoke else
             [("ingest", ingest), ("ask", ask), ("train", train), ("eval", evaluate)])
    for name, work in order:
        step(table, name, work)
        (out / "table.json").write_text(json.dumps(table, indent=2))  # a killed run keeps its steps
    table["total_s"] = round(time.perf_counter() - started, 1)
    (out / "table.json").write_text(json.dumps(table, indent=2))
    print_table(table)
    failed = [name for name, _ in order if "error" in table[name]] + \
             [f"ask {m}" for m, a in table["ask"].get("modes", {}).items() if "error" in a]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


def print_table(table: dict) -> None:
    kind = " (dry run)" if table["dry_run"] else " (smoke, tiny models)" if table["smoke"] else ""
    env = ", ".join(f"{k} {v}" for k, v in table["environment"].items())
    print(f"\ndevice {table['device']}{kind}: {env}")
    seconds = ", ".join(f"{name} {table[name]['seconds']} s" for name in ("ingest", "ask", "train", "eval"))
    print(f"total {table['total_s']} s: {seconds}")
    train = table["train"]
    if "heldout_kl" in train:
        print(f"train: {train['steps']} steps on {train['windows']} windows; held-out KL {train['heldout_kl']}, "
              f"top-1 {train['heldout_top1']} (full translation)")
    questions = table["eval"].get("questions", "-")
    print(f"{'mode':18} {'ask TTFT ms':>12} {'SQuAD F1':>9} {'retention [95% CI]':>24} {'eval TTFT ms':>13}"
          f"   ({questions} questions)")
    for mode in MODES:
        ask = table["ask"].get("modes", {}).get(mode, {})
        ev = table["eval"].get("modes", {}).get(mode, {})
        low, high = ev.get("retention_ci95") or (None, None)
        retention = f"{ev.get('retention')} [{low}, {high}]" if ev else "-"
        print(f"{mode:18} {ask.get('ttft_ms', 'failed')!s:>12} {ev.get('f1', '-')!s:>9} {retention:>24} "
              f"{ev.get('ttft_median_ms', '-')!s:>13}")
    for name in ("ingest", "ask", "train", "eval"):
        if "error" in table[name]:
            print(f"{name}: {table[name]['error']}")


if __name__ == "__main__":
    main()
