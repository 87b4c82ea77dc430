"""`cag ingest --ray` on a local Ray cluster, two workers per model: the same store as a local ingest
(rows, cache files by key, answers), resumed after a killed worker and after a killed driver."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from cag.ask import ask
from cag.distributed.ingest import ray_ingest
from cag.distributed.options import RayOptions
from cag.ingest.pipeline import IngestOptions, ingest
from cag.kv.serde import load_chunk_cache
from cag.store import Store

pytestmark = pytest.mark.xdist_group("ray")  # one local Ray cluster at a time (make test runs two workers)

QUESTIONS = ["How long can the European lobster grow?", "How tall is Mount Elbert?", "When did Beatriz form?"]


def options(tiny_models, also_for=True):
    return IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32, batch_size=2,
                         also_for=(tiny_models["generator"],) if also_for else ())


def assert_same_store(want, got):
    """The same catalog rows (embeddings close), the same cache files by key with the same metadata
    and (nearly) the same tensors, the same index size."""
    a, b = Store.open(want), Store.open(got)
    rows_a, rows_b = a.catalog.all_chunks(), b.catalog.all_chunks()
    assert [r for r in rows_a] == [r for r in rows_b] and rows_a  # ids, paths, locators, texts, spans, digests
    ids, vectors_a = a.catalog.embeddings(a.config.embedding_dim)
    ids_b, vectors_b = b.catalog.embeddings(b.config.embedding_dim)
    assert ids.tolist() == ids_b.tolist() and np.allclose(vectors_a, vectors_b, atol=1e-5)
    files = sorted(p.relative_to(want) for p in (want / "caches").rglob("*.safetensors"))
    assert files == sorted(p.relative_to(got) for p in (got / "caches").rglob("*.safetensors"))
    for name in files:
        x, y = load_chunk_cache(want / name), load_chunk_cache(got / name)
        assert x.meta == y.meta and x.text == y.text and torch.equal(x.token_ids, y.token_ids)
        for s, t in zip(x.keys + x.values, y.keys + y.values):
            assert torch.allclose(s.float(), t.float(), atol=2e-3)
    assert a.index().info.count == b.index().info.count == len(rows_a)
    assert not list(got.rglob(".tmp-*"))
    a.close(), b.close()


@pytest.fixture
def local_store(tiny_models, corpus, tmp_path):
    def make(**extra):
        """The local ingest's store folder and its report."""
        folder = tmp_path / "local"
        return folder, ingest([corpus], folder, options(tiny_models, **extra))
    return make


def counts(report) -> tuple:
    return (report.files_ingested, report.documents, report.chunks_new, report.caches_written,
            report.tokens_prefilled, report.chunks_total, report.tokens_total)


def test_ray_ingest_gives_the_local_store_and_the_same_answers(ray_cluster, tiny_models, corpus, tmp_path,
                                                               local_store):
    want, local = local_store()
    report = ray_ingest([corpus], tmp_path / "ray", options(tiny_models), RayOptions(workers=2))
    assert counts(report) == counts(local) and report.files_ingested == 4
    assert_same_store(want, tmp_path / "ray")
    for question in QUESTIONS:  # the generator's own caches, from each store
        local, remote = (ask(question, folder, model=tiny_models["generator"], top_k=2, mode="native", max_new_tokens=6)
                         for folder in (want, tmp_path / "ray"))
        assert remote.answer == local.answer and remote.sources == local.sources and remote.mode == "native"
    again = ray_ingest([corpus], tmp_path / "ray", options(tiny_models), RayOptions(workers=2))
    assert again.files_unchanged == 4 and again.caches_written == 0


def test_a_killed_worker_is_restarted_and_the_store_is_the_same(ray_cluster, tiny_models, corpus, tmp_path,
                                                                local_store, monkeypatch):
    want, _ = local_store(also_for=False)
    monkeypatch.setenv("CAG_WORKER_FAULT", "cache_written:2")  # the second cache a worker writes ...
    monkeypatch.setenv("CAG_FAULT_ONCE", str(tmp_path / "killed"))  # ... once, in one worker
    report = ray_ingest([corpus], tmp_path / "ray", options(tiny_models, also_for=False), RayOptions(workers=2))
    assert (tmp_path / "killed").exists() and report.files_ingested == 4
    assert_same_store(want, tmp_path / "ray")


def cli_ingest(address, corpus, store, tiny_models, cag_home, fault=None):
    env = {**os.environ, "CAG_HOME": str(cag_home), "HF_HUB_OFFLINE": "1"}
    env.pop("CAG_FAULT", None)
    if fault:
        env["CAG_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "cli", "ingest", str(corpus), "--store", str(store),
                           "--encoder", tiny_models["encoder"], "--chunk-tokens", "32", "--batch-size", "2",
                           "--ray", address, "--ray-workers", "2"], capture_output=True, text=True, env=env)


def test_a_killed_driver_is_resumed_by_running_the_command_again(ray_cluster, tiny_models, corpus, tmp_path,
                                                                 cag_home, local_store):
    want, _ = local_store(also_for=False)
    total = len(list((want / "caches").rglob("*.safetensors")))
    killed = cli_ingest(ray_cluster, corpus, tmp_path / "ray", tiny_models, cag_home, fault="after_commit:2")
    assert killed.returncode == -9, killed.stderr[-800:]
    resumed = cli_ingest(ray_cluster, corpus, tmp_path / "ray", tiny_models, cag_home)
    assert resumed.returncode == 0, resumed.stderr[-800:]
    written = int(re.search(r"(\d+) caches prefilled", resumed.stdout).group(1))
    assert written < total  # the caches the killed run wrote were kept
    assert_same_store(want, tmp_path / "ray")
