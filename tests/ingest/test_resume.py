"""kill -9 a real `cag ingest` subprocess at several points, re-run it, compare with a clean ingest.

The killed runs are real processes; the clean run and each resume run in this process (the same
ingest, without paying a process start and a model load each time)."""

import os
import subprocess
import sys
from pathlib import Path


from cag.store import Store

KILL_POINTS = ["cache_written:1", "cache_written:7", "in_transaction:2", "after_commit:3",
               "index_saved:1"]


def ingest_here(corpus, store, tiny_models):
    from cag.ingest.pipeline import IngestOptions, ingest
    return ingest([corpus], store, IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32, batch_size=2))


def run_ingest(corpus, store, tiny_models, cag_home, fault=None):
    env = {**os.environ, "CAG_HOME": str(cag_home), "HF_HUB_OFFLINE": "1"}
    env.pop("CAG_FAULT", None)
    if fault:
        env["CAG_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "cli", "ingest", str(corpus), "--store", str(store),
                           "--encoder", tiny_models["encoder"], "--chunk-tokens", "32",
                           "--batch-size", "2"], capture_output=True, text=True, env=env)


def snapshot(store_dir: Path) -> dict:
    store = Store.open(store_dir)
    chunks = store.catalog.all_chunks()
    index = store.index()
    ids, _ = store.catalog.embeddings(store.config.embedding_dim)
    files = sorted(str(p.relative_to(store_dir)) for p in (store_dir / "caches").rglob("*") if p.is_file())
    snap = {"chunks": sorted((c.doc.replace(str(store_dir.parent), ""), c.idx, c.text) for c in chunks),
            "cache_files": files, "index_count": index.info.count, "ids": sorted(ids.tolist()),
            "generation_ok": index.info.generation == store.catalog.generation,
            "tmp_files": [p.name for p in store_dir.rglob(".tmp-*")]}
    store.close()
    return snap




def test_killed_ingest_resumes_to_the_clean_result(tiny_models, corpus, tmp_path, cag_home):
    clean_store = tmp_path / "clean_store"
    ingest_here(corpus, clean_store, tiny_models)
    want = snapshot(clean_store)
    assert want["cache_files"] and not want["tmp_files"] and want["generation_ok"]
    for point in KILL_POINTS:
        store = tmp_path / f"store_{point.replace(':', '_')}"
        killed = run_ingest(corpus, store, tiny_models, cag_home, fault=point)
        assert killed.returncode == -9, (point, killed.stderr[-500:])
        ingest_here(corpus, store, tiny_models)
        got = snapshot(store)
        assert got["chunks"] == want["chunks"], point
        assert got["cache_files"] == [f.replace("clean_store", store.name) for f in want["cache_files"]], point
        assert got["index_count"] == want["index_count"] == len(got["ids"]), point
        assert got["generation_ok"] and not got["tmp_files"], point
