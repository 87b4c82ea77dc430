"""`cag serve` as a real process, killed (SIGKILL, as kill -9) in the middle of requests, then
started again: the store and the sessions are intact, and what was cut short is picked up."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cag.server.config import ServeConfig
from cag.server.sessions import Sessions
from cag.store import Store

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    """`python -m cli serve` on a free port; `CAG_FAULT` makes it SIGKILL itself at a named point."""

    def __init__(self, store, tiny_models, home, fault=None):
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {**os.environ, "CAG_HOME": str(home), "HF_HUB_OFFLINE": "1"}
        env.pop("CAG_FAULT", None)
        if fault:
            env["CAG_FAULT"] = fault
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--store", str(store), "--models", tiny_models["generator"],
             "--port", self.url.rsplit(":", 1)[1], "--max-loaded", "3"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 90
        while True:
            assert self.proc.poll() is None, self.proc.stderr.read()
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.time() < deadline, "the server did not come up"
            time.sleep(0.1)

    def post(self, path, body):
        return httpx.post(f"{self.url}{path}", json=body, timeout=60)

    def killed_by(self, path, body):
        """Send a request the server dies in the middle of; its exit is SIGKILL's."""
        with pytest.raises(httpx.TransportError):
            self.post(path, body)
        assert self.proc.wait(timeout=30) == -signal.SIGKILL


def counts(store):
    opened = Store.open(store)
    try:
        return opened.catalog.counts(), opened.index().info.count
    finally:
        opened.close()


def test_killed_mid_request_then_restarted(served_store, tiny_models, server_home, start_server, tmp_path):
    store = shutil.copytree(served_store, tmp_path / "store", ignore=shutil.ignore_patterns("sessions", "uploads"))
    before = counts(store)

    # killed while a turn ingests its records into the session (the second time an ingest reaches its
    # commit): the records are in turns.jsonl, the session store's catalog has not taken them
    first = Process(store, tiny_models, server_home, fault="before_commit:2")
    sid = first.post("/v1/sessions", {}).json()["id"]
    assert first.post(f"/v1/sessions/{sid}/turns", {"message": "Lobsters are blue.", "max_new_tokens": 3}).status_code == 200
    first.killed_by(f"/v1/sessions/{sid}/turns", {"message": "What colour are they?", "max_new_tokens": 3})
    assert Sessions(store, Store.open(store).config).lagging(sid)  # killed where it was meant to be

    # started again (in this process, to spare a second start-up): the main store is as it was, the
    # session holds both turns and the next turn ingests the cut-short records before reading them all
    restarted = start_server(ServeConfig(store=store, port=0, models=(tiny_models["generator"],)))
    assert counts(store) == before
    ask = httpx.post(f"{restarted.url}/v1/ask", json={"question": "How tall is Mount Elbert?", "max_new_tokens": 2})
    assert ask.status_code == 200 and ask.json()["mode"] == "native"
    session = httpx.get(f"{restarted.url}/v1/sessions/{sid}", timeout=60).json()
    assert [r["role"] for r in session["records"]] == ["user", "assistant"] * 2
    turn = httpx.post(f"{restarted.url}/v1/sessions/{sid}/turns", json={"message": "Sure?", "max_new_tokens": 3},
                      timeout=60)
    assert turn.status_code == 200, turn.text
    parts = turn.json()["history"]["parts"]
    assert [p["n"] for p in parts] == [1, 2, 3, 4] and all(p["chunks"] >= 1 for p in parts)
    upload = {"documents": [{"name": "comet.txt", "text": "The Zorblax comet returns every 77 years. " * 3}]}
    again = httpx.post(f"{restarted.url}/v1/ingest", json=upload, timeout=60)  # the store takes writes as before
    assert again.status_code == 200 and again.json()["files_ingested"] == 1
    assert counts(store)[0]["files"] == before[0]["files"] + 1
    found = httpx.post(f"{restarted.url}/v1/ask", json={"question": "When does the Zorblax comet return?",
                                                        "top_k": 1, "max_new_tokens": 1}, timeout=60).json()["sources"]
    assert found[0]["doc"].endswith("uploads/comet.txt")

