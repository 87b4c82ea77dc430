"""Load test of `cag serve` on loopback: a real server process with the real models on the demo store
(a hard-linked copy), N concurrent clients each sending M streamed /v1/ask requests (modes and
questions in turn). Per request: the client's first token and total latency, the server's TTFT and
queue time (from the result event); failures (any non-200, error event or transport error) counted.

Writes runs/benchmarks/serve_load-<generator>.json (or --out).
Usage: python benchmarks/bench_serve_load.py [--clients 4] [--requests 50]
"""

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import torch

from cag.store import default_store_dir
from serve_process import ROOT, ServeProcess, add_threads_option, apply_threads, linked_copy, streamed_ask

QUESTIONS = ["How long can the European lobster grow?", "How tall is Mount Elbert?",
             "When did Hurricane Beatriz form?", "Between which towns does M-82 run?",
             "When was Upsilon Andromedae b discovered?", "What colour are living European lobsters?",
             "Who was Mount Elbert named after?", "How many deaths did Hurricane Beatriz cause?"]


def client_loop(url: str, n: int, offset: int, modes: list, args, out: list) -> None:
    with httpx.Client(base_url=url, timeout=600) as client:
        for i in range(n):
            k = offset + i
            body = {"question": QUESTIONS[k % len(QUESTIONS)], "mode": modes[k % len(modes)], "top_k": args.top_k,
                    "max_new_tokens": args.max_new_tokens}
            result = streamed_ask(client, body)
            result["asked_mode"] = body["mode"]
            out.append(result)


def percentiles(values: list) -> dict:
    if not values:
        return {}
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50": round(float(p50), 1), "p95": round(float(p95), 1), "max": round(max(values), 1),
            "mean": round(statistics.mean(values), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=default_store_dir())
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--modes", default="native,translated")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=50, help="per client")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default runs/benchmarks/serve_load-GENERATOR.json)")
    add_threads_option(parser)
    args = parser.parse_args()
    apply_threads(args)
    modes = args.modes.split(",")
    results: list = []
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        store = linked_copy(args.store, Path(tmp) / "store")
        server = ServeProcess(store, args.generator)
        try:
            start = time.perf_counter()
            threads = [threading.Thread(target=client_loop, args=(server.url, args.requests, c * args.requests, modes,
                                                                  args, results)) for c in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            seconds = time.perf_counter() - start
            load.append(os.getloadavg()[0])
            metrics = httpx.get(f"{server.url}/metrics", timeout=60).text
        finally:
            server.stop()
    ok = [r for r in results if "error" not in r]
    failures = [r["error"] for r in results if "error" in r]
    by = lambda key, rows: [r[key] for r in rows]  # noqa: E731
    timing = lambda rows: {"client_first_token_ms": percentiles(by("first_token_ms", rows)),  # noqa: E731
                           "client_latency_ms": percentiles(by("latency_ms", rows)),
                           "server_ttft_ms": percentiles([r["timings_ms"]["ttft"] for r in rows]),
                           "queue_ms": percentiles([r["timings_ms"]["queue"] for r in rows])}
    record = {"date": time.strftime("%Y-%m-%d"), "threads": torch.get_num_threads(), "device": "cpu", "dtype": "fp32",
              "generator": args.generator, "store": str(args.store), "clients": args.clients,
              "requests_per_client": args.requests, "modes": modes, "top_k": args.top_k,
              "max_new_tokens": args.max_new_tokens, "requests": len(results), "failed": len(failures),
              "failures": failures[:10], "seconds": round(seconds, 1), "requests_per_s": round(len(results) / seconds, 3),
              "load_average_1min": {"min": min(load), "max": max(load)}, "all": timing(ok),
              "per_mode": {m: timing([r for r in ok if r["mode"] == m]) for m in modes},
              "modes_answered": {m: sum(r["mode"] == m for r in ok) for m in modes},
              "server_counters": [line for line in metrics.splitlines()
                                  if line.startswith(("cag_requests_total", "cag_request_errors_total"))]}
    out = args.out or ROOT / "runs" / "benchmarks" / f"serve_load-{args.generator}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    print(json.dumps({k: v for k, v in record.items() if k not in ("server_counters",)}, indent=1))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
