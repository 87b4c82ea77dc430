"""Warm TTFT at about 2k context tokens, three ways side by side, per mode:

- server: a `cag serve` process (models warm), /v1/ask streamed; the server's own `ttft` (from the
  start of the work on the question to its first token, its queue apart) and the client's first
  token (request sent to first token event: HTTP, queue, embedding, everything);
- in process: `cag.ask.ask` with the generator and retriever kept loaded;
- one-shot CLI: `cag ask --json`, a new process per question (`ttft` excludes the one-time costs,
  reported as `warmup`; the process's wall time is reported too).

Measurements alternate (path by path, mode by mode, repeat by repeat), so a busy machine slows
every path alike. The demo store is used through a hard-linked copy; translations are stored by an
untimed first translated ask, so `translated` reads them as a warm server would (the first ask's
translation time is reported apart).

Writes runs/benchmarks/serve_ttft-<generator>.json (or --out).
Usage: python benchmarks/bench_serve_ttft.py [--repeats 3] [--target 2048]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

from bench_ask import _top_k_for
from cag.ask import ask
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store, default_store_dir
from serve_process import ROOT, ServeProcess, add_threads_option, apply_threads, linked_copy, streamed_ask

QUESTION = "When did Hurricane Beatriz form and what damage did it cause?"


def one_shot(store: Path, generator: str, mode: str, top_k: int, max_new_tokens: int) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "cli", "ask", QUESTION, "--store", str(store), "--model", generator,
                          "--mode", mode, "--top-k", str(top_k), "--max-new-tokens", str(max_new_tokens), "--json"],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return {"ttft_ms": data["timings_ms"]["ttft"], "warmup_ms": data["timings_ms"]["warmup"],
            "process_ms": (time.perf_counter() - start) * 1e3, "answer": data["answer"],
            "context_tokens": data["context_tokens"]}


def median(values) -> float:
    return round(statistics.median(values), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=default_store_dir())
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--modes", default="native,translated,direct")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=int, default=2048, help="context tokens to reach (top-k chosen for it)")
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default runs/benchmarks/serve_ttft-GENERATOR.json)")
    add_threads_option(parser)
    args = parser.parse_args()
    apply_threads(args)
    modes = args.modes.split(",")
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        store = linked_copy(args.store, Path(tmp) / "store")
        for space in Store.open(store).spaces():  # stored translations: gone, so the first ask translates
            if space.role == "translated":
                shutil.rmtree(store / "caches" / space.key)
        lm = load_model(args.generator)
        retriever = Retriever(Store.open(store))
        top_k = _top_k_for(retriever, QUESTION, args.target)
        common = dict(model=args.generator, top_k=top_k, max_new_tokens=args.max_new_tokens, lm=lm, retriever=retriever)
        first = ask(QUESTION, mode="translated", **common) if "translated" in modes else None  # stores translations
        ask(QUESTION, mode="direct", **{**common, "max_new_tokens": 1})  # pages everything in
        server = ServeProcess(store, args.generator)
        rows = {m: {"server": [], "server_client": [], "in_process": [], "one_shot": [], "one_shot_process": [],
                    "answers": set()} for m in modes}
        context_tokens = {}
        try:
            with httpx.Client(base_url=server.url, timeout=600) as client:
                for repeat in range(args.repeats):
                    for mode in modes:
                        body = {"question": QUESTION, "mode": mode, "top_k": top_k, "max_new_tokens": args.max_new_tokens}
                        served = streamed_ask(client, body)
                        if "error" in served:
                            raise RuntimeError(served["error"])
                        local = ask(QUESTION, mode=mode, **common)
                        cli = one_shot(store, args.generator, mode, top_k, args.max_new_tokens)
                        row = rows[mode]
                        row["server"].append(served["timings_ms"]["ttft"])
                        row["server_client"].append(served["first_token_ms"])
                        row["in_process"].append(local.timings_ms["ttft"])
                        row["one_shot"].append(cli["ttft_ms"])
                        row["one_shot_process"].append(cli["process_ms"])
                        row["answers"] |= {served["answer"], local.answer, cli["answer"]}
                        context_tokens[mode] = local.context_tokens
                        load.append(os.getloadavg()[0])
                        print(mode, repeat, {k: round(v[-1]) for k, v in row.items() if k != "answers"}, flush=True)
        finally:
            server.stop()
    table = {}
    for mode in modes:
        row = rows[mode]
        table[mode] = {"context_tokens": context_tokens[mode], **{f"{k}_ms": median(v) for k, v in row.items() if k != "answers"},
                       "server_over_in_process": round(median(row["server"]) / median(row["in_process"]), 2),
                       "same_answer_everywhere": len(row["answers"]) == 1, "runs": {k: v for k, v in row.items() if k != "answers"}}
    if "direct" in table:
        for mode in modes:
            table[mode]["speedup_vs_direct"] = {path: round(table["direct"][f"{path}_ms"] / table[mode][f"{path}_ms"], 2)
                                                for path in ("server", "in_process", "one_shot")}
    record = {"date": time.strftime("%Y-%m-%d"), "threads": torch.get_num_threads(), "device": "cpu", "dtype": "fp32",
              "generator": args.generator, "store": str(args.store), "question": QUESTION, "top_k": top_k,
              "repeats": args.repeats, "max_new_tokens": args.max_new_tokens,
              "translating_first_ask_ms": first.timings_ms if first else None,
              "load_average_1min": {"min": min(load), "max": max(load)}, "modes": table}
    out = args.out or ROOT / "runs" / "benchmarks" / f"serve_ttft-{args.generator}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    print(json.dumps({m: {k: v for k, v in t.items() if k != "runs"} for m, t in table.items()}, indent=1))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
