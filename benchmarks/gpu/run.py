"""The prepared GPU run: one script, sized for 8 minutes on one large GPU, that exercises every part
of cag on the device and prints one table.

    convert  the encoder's and the generator's GGUF files into model folders, both at once (on a
             fresh machine this is most of the ingest's time, spent parsing on one core each)
    ingest   the sample corpus (encoder + the generator's own caches) on the device
    ask      `cag serve` started once on the device, then one question in every mode, twice: the
             first time (cold paths, translations made) and again (warm, translations stored);
             translated modes use the shipped translator, found by fingerprint
    train    a translator for 50 steps (a small run, not a shipped recipe)   } at once: the small
    eval     100 SQuAD questions: direct, native, translated,                } models leave a large
             translated-blend, none; on Ray workers sharing the GPU where     } GPU mostly idle
             Ray is installed (--eval-workers), else in one process

Usage: python benchmarks/gpu/run.py [--device cuda] [--dry-run | --smoke] [--out DIR]
  --dry-run   the same steps on the CPU, each made tiny (3 questions, 2 steps): a check that the
              script and the `--device` paths work where no GPU is
  --smoke     tiny random models built in code, tiny steps, on --device: the device paths checked
              in seconds before any real model has arrived (its translator is trained first and
              installed, since none is shipped for tiny models; the steps then run one at a time)
  --encoder / --generator   model aliases or .gguf paths (a GPU machine without PyPI access gets
              the GGUF files carried, see benchmarks/gpu/README.md)
A step that fails is recorded with its exit status and the run goes on, so one table always comes
out. Writes OUT/table.json and prints the table; exits 1 if any step failed. Steps that run at once
write their output to OUT/<step>.log instead of this one's.
"""

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from serve_process import ServeProcess, streamed_ask  # noqa: E402
QUESTION = "How long can the European lobster grow?"
MODES = ("direct", "native", "translated", "translated-blend", "none")
STEPS = ("convert", "ingest", "ask", "train", "eval")
SERVER_START_S = 300  # models loaded and warmed on the device (10-19 s per process on the H200)


class StepFailed(Exception):
    pass


def command_line(args) -> list[str]:
    return [sys.executable, "-m", "cli", *map(str, args)]


def announce(args, log: Path | None = None) -> None:
    where = f"   (output: {log})" if log else ""
    print(f"[{time.strftime('%H:%M:%S')}] $ cag " + " ".join(map(str, args)) + where, flush=True)


def cag(*args, log: Path | None = None, env: dict | None = None) -> None:
    """Run one `cag` command (this checkout's code); its output streams to ours, or into `log`;
    `env`: variables set for it."""
    announce(args, log)
    env = {**os.environ, **(env or {})}
    if log is None:
        code = subprocess.run(command_line(args), cwd=ROOT, env=env).returncode
    else:
        with open(log, "w") as out:
            code = subprocess.run(command_line(args), cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT).returncode
    if code != 0:
        where = f"the end of {log}" if log else "the log above"
        if log is not None:
            print(f"--- the end of {log}:\n{tail(log)}", file=sys.stderr, flush=True)
        raise StepFailed(f"`cag {args[0]}` exited with {code} (its error is in {where})")


def tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def step(table: dict, name: str, work) -> None:
    """Run one step, timing it; a failure is recorded in the table instead of ending the run."""
    t0 = time.perf_counter()
    try:
        table[name] = work()
    except (StepFailed, OSError, KeyError, ValueError) as exc:
        table[name] = {"error": str(exc)}
        print(f"step {name} FAILED: {exc}", file=sys.stderr, flush=True)
    table[name]["seconds"] = round(time.perf_counter() - t0, 1)


def at_once(table: dict, steps: list) -> None:
    """Run (name, work) steps in threads at once (each work starts its own process)."""
    threads = [threading.Thread(target=step, args=(table, name, work)) for name, work in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


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
    info["ray"] = "yes" if importlib.util.find_spec("ray") else "no"
    return info


def tiny_models(folder: Path) -> tuple[str, str]:
    """A tiny llama encoder and a tiny qwen2 generator, saved as folders (`cag` loads folders)."""
    sys.path.insert(0, str(ROOT))
    from tests.tiny_models import save_tiny_model

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
    parser.add_argument("--eval-workers", type=int, default=4,
                        help="Ray workers sharing the GPU to answer the eval, each taking 1/N of it "
                             "(1: the eval in one process; on the CPU: one worker per core)")
    parser.add_argument("--eval-cpus-per-worker", type=int, default=2, help="CPUs (torch threads) of each")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-run")
    args = parser.parse_args()
    if args.eval_workers < 1 or args.eval_cpus_per_worker < 1:
        parser.error("--eval-workers and --eval-cpus-per-worker take at least 1")
    device = "cpu" if args.dry_run else args.device
    dtype = "fp32" if device == "cpu" else "bf16"
    tiny = args.dry_run or args.smoke
    questions, steps, windows = (3, 2, 4) if tiny else (args.questions, args.steps, 128)
    eval_cpus = 1 if device == "cpu" else args.eval_cpus_per_worker
    gpu_share = round(1 / args.eval_workers, 4)
    use_ray = args.eval_workers > 1 and importlib.util.find_spec("ray") is not None
    # beside the eval's workers, the training's torch threads take what they leave (threads that
    # spin past a machine's cores slow every process's Python-bound launches)
    spare = (os.cpu_count() or 2) - (args.eval_workers * eval_cpus if use_ray else (os.cpu_count() or 2) // 2)
    train_env = {} if args.smoke or device == "cpu" else {"OMP_NUM_THREADS": str(max(1, spare))}
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    encoder, generator = tiny_models(out / "models") if args.smoke else (args.encoder, args.generator)
    table = {"device": device, "dry_run": args.dry_run, "smoke": args.smoke, "encoder": encoder,
             "generator": generator, "environment": environment(device)}
    started = time.perf_counter()
    common = ["--device", device, "--dtype", dtype]

    def convert() -> dict:
        # model_identity converts a GGUF file (once) and loads no weights; one process per model
        script = "import sys; from cag.models.loading import model_identity; model_identity(sys.argv[1])"
        procs = [subprocess.Popen([sys.executable, "-c", script, name], cwd=ROOT) for name in (encoder, generator)]
        codes = [proc.wait() for proc in procs]
        if any(codes):
            raise StepFailed(f"converting the models exited with {codes}")
        return {}

    def ingest() -> dict:
        cag("ingest", ROOT / "samples" / "corpus", "--store", out / "store", "--encoder", encoder,
            "--also-for", generator, *common)
        return {}

    def ask() -> dict:
        t0 = time.perf_counter()
        log = out / "serve.log"
        announce(["serve", "--store", out / "store", "--models", generator, *common], log)
        try:
            server = ServeProcess(out / "store", generator, *common, timeout=SERVER_START_S, log=log)
        except RuntimeError as exc:
            print(f"--- the end of {log}:\n{tail(log)}", file=sys.stderr, flush=True)
            raise StepFailed(str(exc)) from None
        ready_s = round(time.perf_counter() - t0, 1)
        answers = {}
        try:
            with httpx.Client(base_url=server.url, timeout=300) as client:
                for mode in MODES:
                    body = {"question": QUESTION, "model": generator, "mode": mode, "max_new_tokens": 16}
                    tries = [streamed_ask(client, body) for _ in range(2)]
                    failed = [t["error"] for t in tries if "error" in t]
                    answers[mode] = {"error": failed[0]} if failed else {
                        "answer": tries[1]["answer"], "first_ttft_ms": tries[0]["timings_ms"]["ttft"],
                        "ttft_ms": tries[1]["timings_ms"]["ttft"]}
                    if not failed and tries[0]["answer"] != tries[1]["answer"]:
                        answers[mode]["first_answer"] = tries[0]["answer"]
        finally:
            server.stop()
        return {"server_ready_s": ready_s, "modes": answers}

    def train() -> dict:
        cag("train", "--source", encoder, "--target", generator, "--steps", steps, "--windows", windows,
            "--heldout-windows", min(windows, 16), "--device", device,
            "--install" if args.smoke else "--no-install", "--out", out / "train",
            log=None if args.smoke else out / "train.log", env=train_env)
        record = json.loads((out / "train" / "translator.json").read_text())
        heldout = record["spec"]["metrics"]["heldout"]["full"]
        return {"steps": steps, "windows": windows, "heldout_kl": heldout["kl"], "heldout_top1": heldout["top1"],
                "torch_threads": train_env.get("OMP_NUM_THREADS", "default")}

    def evaluate() -> dict:
        # no --ray-workers: the passages' ingest (two models) and the answers (one) each fill the GPU's
        # share of slots (on the CPU: the cluster's CPUs)
        ray = (["--ray", "local", "--ray-cpus-per-worker", eval_cpus, "--ray-gpus-per-worker", gpu_share]
               if use_ray else [])
        cag("eval", "--dataset", "squad", "--limit", questions, "--model", generator, "--encoder", encoder,
            "--modes", ",".join(MODES), "--blend", 0.25, "--device", device, "--dtype", dtype,
            "--out", out / "eval", *ray, log=None if args.smoke else out / "eval.log")
        metrics = json.loads((out / "eval" / "metrics.json").read_text())["modes"]
        return {"questions": questions, "ray_gpus_per_worker": gpu_share if use_ray else None,
                "modes": {m: {k: metrics[m].get(k) for k in ("f1", "retention", "retention_ci95", "ttft_median_ms")}
                          for m in metrics}}

    for name, work in (("convert", convert), ("ingest", ingest)):
        step(table, name, work)
        (out / "table.json").write_text(json.dumps(table, indent=2))  # a killed run keeps its steps
    # tiny models have no shipped translator: train (and install) theirs before asking
    later = [("train", train), ("ask", ask), ("eval", evaluate)] if args.smoke else [("ask", ask)]
    for name, work in later:
        step(table, name, work)
        (out / "table.json").write_text(json.dumps(table, indent=2))
    if not args.smoke:
        t0 = time.perf_counter()
        at_once(table, [("train", train), ("eval", evaluate)])
        table["train_and_eval_s"] = round(time.perf_counter() - t0, 1)
    table["total_s"] = round(time.perf_counter() - started, 1)
    (out / "table.json").write_text(json.dumps(table, indent=2))
    print_table(table)
    failed = [name for name in STEPS if "error" in table[name]] + \
             [f"ask {m}" for m, a in table["ask"].get("modes", {}).items() if "error" in a]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


def print_table(table: dict) -> None:
    kind = " (dry run)" if table["dry_run"] else " (smoke, tiny models)" if table["smoke"] else ""
    env = ", ".join(f"{k} {v}" for k, v in table["environment"].items())
    print(f"\ndevice {table['device']}{kind}: {env}")
    seconds = ", ".join(f"{name} {table[name]['seconds']} s" for name in STEPS)
    together = f" (train and eval at once: {table['train_and_eval_s']} s)" if "train_and_eval_s" in table else ""
    print(f"total {table['total_s']} s: {seconds}{together}")
    if "server_ready_s" in table["ask"]:
        print(f"ask: the server loaded and warmed its models in {table['ask']['server_ready_s']} s")
    train = table["train"]
    if "heldout_kl" in train:
        print(f"train: {train['steps']} steps on {train['windows']} windows; held-out KL {train['heldout_kl']}, "
              f"top-1 {train['heldout_top1']} (full translation)")
    ev = table["eval"]
    if "questions" in ev:
        share = ev["ray_gpus_per_worker"]
        workers = ("one process" if not share else "Ray workers, one per CPU" if table["device"] == "cpu"
                   else f"Ray workers taking {share:g} of the GPU each")
        print(f"eval: {ev['questions']} SQuAD questions, answered by {workers}")
    print(f"{'mode':18} {'ask TTFT ms: first':>19} {'again':>6}  {'answer':24} {'SQuAD F1':>9} "
          f"{'retention [95% CI]':>24} {'eval TTFT ms':>13}")
    for mode in MODES:
        ask = table["ask"].get("modes", {}).get(mode, {})
        ev = table["eval"].get("modes", {}).get(mode, {})
        low, high = ev.get("retention_ci95") or (None, None)
        retention = f"{ev.get('retention')} [{low}, {high}]" if ev else "-"
        print(f"{mode:18} {ask.get('first_ttft_ms', 'failed')!s:>19} {ask.get('ttft_ms', '-')!s:>6}  "
              f"{str(ask.get('answer', '-'))[:24]:24} {ev.get('f1', '-')!s:>9} {retention:>24} "
              f"{ev.get('ttft_median_ms', '-')!s:>13}")
    for name in STEPS:
        if "error" in table[name]:
            print(f"{name}: {table[name]['error']}")
    for mode, ask in table["ask"].get("modes", {}).items():
        if "error" in ask:
            print(f"ask {mode}: {ask['error']}")


if __name__ == "__main__":
    main()
