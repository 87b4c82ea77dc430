"""Which FAISS index a store builds (`--faiss-factory`, `auto` by size), how hard it searches, its
recall against exact search, its digest-checked files, and when it moves to a GPU."""

import json

import faiss
import numpy as np
import pytest
from typer.testing import CliRunner

from cag.ingest.pipeline import IngestOptions, ingest
from cag.store import Store
from cag.store.check import check_store
from cag.store.index_file import read_index, save_index
from cli.main import app
from indexes import factory, gpu
from indexes.factory import check_factory, factory_for, resolve
from indexes.faiss_index import IndexSetupError, VectorIndex


def clustered(n, dim=32, clusters=200, noise=0.6, seed=0):
    """Unit vectors around `clusters` centres (documents), like chunk embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    v = centres[rng.integers(0, clusters, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_factory_strings_are_checked_with_one_line_errors():
    for good in ("auto", "Flat", "IVF64,Flat", "HNSW32", "IVF16,SQ8", "IVF16,PQ8"):
        check_factory(good, 32)
    for bad, dim in (("NoSuchIndex", 32), ("IVF16,PQ7", 32), ("", 32), (" Flat", 32)):
        with pytest.raises(IndexSetupError, match="Invalid FAISS factory string") as info:
            check_factory(bad, dim)
        assert "\n" not in str(info.value) and repr(bad) in str(info.value)


def test_auto_picks_flat_then_hnsw_by_size():
    assert factory_for(1) == factory_for(1_000_000) == "Flat"
    assert factory_for(1_000_001) == "HNSW32"
    assert resolve("auto", 10) == "Flat" and resolve("IVF4,Flat", 10) == "IVF4,Flat"


def test_approximate_indexes_search_with_set_effort_and_keep_it_through_their_files(tmp_path):
    vecs = clustered(2000)
    ivf = VectorIndex.build("IVF32,Flat", 32, "e", np.arange(2000), vecs, 1)
    hnsw = VectorIndex.build("HNSW32", 32, "e", np.arange(2000), vecs, 1)
    assert faiss.extract_index_ivf(ivf.index).nprobe == ivf.search_params["nprobe"] > 1
    assert faiss.downcast_index(hnsw.index.index).hnsw.efSearch == hnsw.search_params["efSearch"] > 16
    for index in (ivf, hnsw, VectorIndex.build("IVF16,SQ8", 32, "e", np.arange(2000), vecs, 1)):
        save_index(tmp_path / index.info.factory, index)
        loaded = read_index(tmp_path / index.info.factory)  # checked against index.json's sha256
        assert loaded.info == index.info and loaded.search_params == index.search_params
        assert np.array_equal(loaded.search(vecs[:20], 5)[1], index.search(vecs[:20], 5)[1])
        assert np.array_equal(np.sort(loaded.ids()), np.arange(2000))


def test_the_auto_choice_above_flat_finds_what_flat_finds(monkeypatch):
    """recall@10 against exact search of the index auto builds above Flat, at the store's effort."""
    monkeypatch.setattr(factory, "FLAT_MAX_VECTORS", 1000)
    vecs = clustered(20_200, clusters=1000, noise=0.7, seed=1)
    data, queries = vecs[:20_000], vecs[20_000:]  # held-out queries: other chunks of the same documents
    chosen = resolve("auto", len(data))
    assert chosen == "HNSW32"
    ids = np.arange(len(data))
    _, truth = VectorIndex.build("Flat", 32, "e", ids, data, 1).search(queries, 10)
    index = VectorIndex.build(chosen, 32, "e", ids, data, 1)

    found = index.search(queries, 10)[1]
    recall = np.mean([len(np.intersect1d(f, t)) / 10 for f, t in zip(found, truth)])
    assert recall >= 0.95, (index.search_params, recall)


def test_gpu_only_where_faiss_has_gpus_and_the_index_a_gpu_version(monkeypatch):
    flat = VectorIndex.build("Flat", 32, "e", np.arange(50), clustered(50), 1)
    hnsw = VectorIndex.build("HNSW32", 32, "e", np.arange(50), clustered(50), 1)
    assert gpu.search_device(flat.index, 0) == "cpu" and gpu.search_device(hnsw.index, 4) == "cpu"
    assert gpu.search_device(flat.index, 1) == "gpu"
    assert gpu.gpu_count() == 0 and gpu.to_gpu(flat.index) is None  # faiss-cpu here: the CPU path
    moved = []
    monkeypatch.setattr(gpu, "gpu_count", lambda: 1)
    monkeypatch.setattr(gpu, "_resources", None)
    monkeypatch.setattr(faiss, "StandardGpuResources", lambda: "resources", raising=False)
    monkeypatch.setattr(faiss, "index_cpu_to_gpu", lambda res, device, index: moved.append((res, device)) or index,
                        raising=False)
    assert gpu.to_gpu(hnsw.index) is None and moved == []
    assert flat.search(clustered(50)[:3], 1)[1][:, 0].tolist() == [0, 1, 2] and moved == [("resources", 0)]


def test_ingest_records_the_factory_and_rebuilds_when_it_or_the_size_changes(tiny_models, corpus, tmp_path,
                                                                               monkeypatch):
    store_dir = tmp_path / "store"
    ingest([corpus], store_dir, IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32))
    store = Store.open(store_dir)
    assert store.config.faiss_factory == "auto" and store.index().info.factory == "Flat"
    monkeypatch.setattr(factory, "FLAT_MAX_VECTORS", 2)  # the store grows past Flat's size
    assert store.index().info.factory == "HNSW32"
    assert read_index(store_dir).info.factory == "HNSW32" and not check_store(store_dir).problems
    store.close()
    runner = CliRunner()
    args = ["ingest", str(corpus), "--store", str(store_dir), "--encoder", tiny_models["encoder"]]
    result = runner.invoke(app, args + ["--faiss-factory", "IVF2,Flat"])
    assert result.exit_code == 0, result.output
    assert json.loads((store_dir / "store.json").read_text())["faiss_factory"] == "IVF2,Flat"
    assert read_index(store_dir).info.factory == "IVF2,Flat"
    assert runner.invoke(app, args).exit_code == 0  # no option: the store keeps its factory
    assert read_index(store_dir).info.factory == "IVF2,Flat"


def test_a_bad_factory_is_one_line_before_any_work(tiny_models, corpus, tmp_path):
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--store", str(tmp_path / "new"), "--encoder",
                                      tiny_models["encoder"], "--faiss-factory", "IVF,Bogus"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.count("\n") == 1 and "--faiss-factory: Invalid FAISS factory string 'IVF,Bogus'" in result.output
    assert not (tmp_path / "new").exists()
