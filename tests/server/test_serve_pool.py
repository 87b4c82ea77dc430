"""The model pool (one queue per model, least recently used unloaded) and the store gate, with fake
models: what runs when, in which order, and what is loaded."""

import threading
import time

import pytest

from cag.errors import CagError
from cag.server.errors import UnknownModelError
from cag.server.gate import StoreGate
from cag.server.pool import ModelPool


class FakeContext:
    def __init__(self, name, closed):
        self.lm, self._closed = name, closed

    def close(self):
        self._closed.append(self.lm)


class FakePool(ModelPool):
    def __init__(self, allowed, max_loaded=2):
        super().__init__(allowed, max_loaded, store_dir=".", embedder=None)
        self.loads, self.closed = [], []

    def _load_context(self, name):
        if name == "broken":
            raise CagError("cannot load broken")
        self.loads.append(name)
        return FakeContext(name, self.closed)


def test_one_model_runs_its_jobs_one_at_a_time_in_arrival_order():
    pool = FakePool(["a"])
    spans, lock = [], threading.Lock()

    def job(n):
        def run(context):
            start = time.perf_counter()
            time.sleep(0.01)
            with lock:
                spans.append((n, start, time.perf_counter()))
            return n
        return run

    futures = [pool.submit("a", job(n)) for n in range(12)]
    assert [f.result(timeout=10).value for f in futures] == list(range(12))
    assert [n for n, _, _ in spans] == list(range(12))  # in the order they arrived
    assert all(spans[i][2] <= spans[i + 1][1] for i in range(11))  # never two at once
    waits = [f.result().queue_ms for f in futures]
    assert waits[-1] >= 100 > waits[0]  # the last one waited for eleven 10 ms jobs
    pool.close()


def test_two_models_work_at_the_same_time():
    pool = FakePool(["a", "b"])
    met = threading.Event()
    waiting = pool.submit("a", lambda context: met.wait(timeout=10))  # a waits for b
    pool.submit("b", lambda context: met.set()).result(timeout=10)
    assert waiting.result(timeout=10).value is True
    pool.close()


def test_least_recently_used_model_is_unloaded_past_max_loaded():
    pool = FakePool(["a", "b", "c", "d"], max_loaded=2)
    for name in ("a", "b", "c"):
        pool.run(name, lambda context: None)
    time.sleep(0.05)
    assert pool.loaded() == ["b", "c"] and pool.closed == ["a"]
    pool.run("b", lambda context: None)  # b is now the most recently used
    pool.run("d", lambda context: None)
    time.sleep(0.05)
    assert pool.loaded() == ["b", "d"] and pool.closed == ["a", "c"] and pool.loads == ["a", "b", "c", "d"]
    pool.close()


def test_a_model_that_fails_to_load_fails_its_requests_and_is_tried_again():
    pool = FakePool(["a", "broken"])
    with pytest.raises(CagError, match="cannot load broken"):
        pool.run("broken", lambda context: None)
    with pytest.raises(CagError, match="cannot load broken"):
        pool.run("broken", lambda context: None)  # not a dead worker: a new try
    assert pool.loaded() == [] and pool.run("a", lambda context: 7).value == 7
    with pytest.raises(UnknownModelError, match="serves a, broken"):
        pool.submit("other", lambda context: None)
    pool.close()


def test_the_gate_lets_readers_share_and_a_writer_go_alone_and_first():
    gate, order = StoreGate(), []
    reading, release = threading.Event(), threading.Event()

    def reader(tag, hold=None):
        with gate.reading():
            order.append(f"{tag}+")
            if hold:
                reading.set()
                hold.wait(timeout=10)
            order.append(f"{tag}-")

    def writer():
        with gate.writing():
            order.append("w+")
            order.append("w-")

    first = threading.Thread(target=reader, args=("r1", release))
    first.start()
    reading.wait(timeout=10)
    w = threading.Thread(target=writer)
    w.start()
    time.sleep(0.05)
    late = threading.Thread(target=reader, args=("r2",))  # arrives while the writer waits
    late.start()
    time.sleep(0.05)
    assert order == ["r1+"]  # the writer waits for r1; r2 waits behind the writer
    release.set()
    for t in (first, w, late):
        t.join(timeout=10)
    assert order == ["r1+", "r1-", "w+", "w-", "r2+", "r2-"]
