"""Helpers of the serving benchmarks: a store copy that leaves the original untouched, a `cag serve`
process on loopback, and a streamed /v1/ask timed from the client's side."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import torch

ROOT = Path(__file__).resolve().parents[1]


def add_threads_option(parser) -> None:
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads here and in the processes started (OMP_NUM_THREADS); default torch's")


def apply_threads(args) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)


def linked_copy(store: Path, into: Path) -> Path:
    """A copy of `store` made of hard links (instant; cag never rewrites a file in place, so writes
    to the copy leave the original alone), without its sessions and uploads."""
    return Path(shutil.copytree(store, into, copy_function=os.link,
                                ignore=shutil.ignore_patterns("sessions", "uploads", "write.lock")))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServeProcess:
    """`python -m cli serve` from this checkout, once it answers /v1/health (its models loaded and
    warm); its output goes to `log` when given; `stop()` sends Ctrl-C."""

    def __init__(self, store: Path, models: str, *extra: str, timeout: float = 600, log: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # this checkout first, and whatever the caller's path held (a GPU machine's carried packages)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        command = [sys.executable, "-m", "cli", "serve", "--store", str(store), "--models", models,
                   "--port", str(self.port), *map(str, extra)]
        output = open(log, "w") if log else None
        try:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output,
                                         stderr=subprocess.STDOUT if log else None)
        finally:
            if output:
                output.close()
        where = f" (its output: {log})" if log else ""
        deadline = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cag serve exited with {self.proc.returncode} before it served{where}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.time() > deadline:
                self.proc.kill()
                raise RuntimeError(f"cag serve did not come up within {timeout:g} s{where}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=120)


def streamed_ask(client: httpx.Client, body: dict) -> dict:
    """POST /v1/ask with "stream": true; the result JSON plus the client's view: `first_token_ms`
    (request sent to first token event) and `latency_ms` (to the result); `error` on a failure."""
    start = time.perf_counter()
    first, result, error = None, None, None
    try:
        with client.stream("POST", "/v1/ask", json={**body, "stream": True}) as reply:
            if reply.status_code != 200:
                return {"error": f"HTTP {reply.status_code}: {reply.read().decode()[:200]}"}
            event = None
            for line in reply.iter_lines():
                if line.startswith("event: "):
                    event = line[len("event: "):]
                elif line.startswith("data: "):
                    if event == "token" and first is None:
                        first = time.perf_counter()
                    elif event == "result":
                        result = json.loads(line[len("data: "):])
                    elif event == "error":
                        error = json.loads(line[len("data: "):])["error"]
    except httpx.HTTPError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    if error or result is None:
        return {"error": error or "no result event"}
    done = time.perf_counter()
    first = first or done  # an empty answer: the result is the first thing sent
    return {**result, "first_token_ms": (first - start) * 1e3, "latency_ms": (done - start) * 1e3}
