"""The FAISS index: factories, explicit ids, deletions, and the store's index files (digest,
stale and damaged detection)."""

import numpy as np
import pytest

from cag.store.index_file import load_index, read_index, save_index
from indexes.faiss_index import IndexSetupError, VectorIndex


def vectors(n, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("factory", ["Flat", "HNSW32", "IVF4,Flat"])
def test_factories_find_each_vector_by_its_id(factory, tmp_path):
    vecs = vectors(200)
    ids = np.arange(1000, 1200, dtype=np.int64)
    index = VectorIndex.build(factory, 16, "test-embedder", ids, vecs, generation=7)
    scores, found = index.search(vecs[:10], 1)
    assert found[:, 0].tolist() == ids[:10].tolist()
    assert np.allclose(scores[:, 0], 1.0, atol=1e-4)
    save_index(tmp_path, index)
    loaded = load_index(tmp_path)
    assert loaded.info.factory == factory and loaded.info.generation == 7
    assert loaded.info.embedder == "test-embedder" and loaded.info.count == 200
    assert loaded.search(vecs[:10], 1)[1][:, 0].tolist() == ids[:10].tolist()


def test_deletions_remove_ids():
    vecs = vectors(20)
    index = VectorIndex.build("Flat", 16, "e", np.arange(20), vecs, generation=1)
    assert index.remove(np.array([3, 4])) == 2
    _, found = index.search(vecs[3:4], 3)
    assert 3 not in found[0].tolist() and index.info.count == 18


def test_bad_factory_and_untrainable_index_are_clear_errors():
    with pytest.raises(IndexSetupError, match="Invalid FAISS factory"):
        VectorIndex.build("NoSuchIndex", 16, "e", np.arange(3), vectors(3), 1)
    with pytest.raises(IndexSetupError, match="needs training vectors"):
        VectorIndex.build("IVF4,Flat", 16, "e", np.zeros(0, dtype=np.int64), np.zeros((0, 16)), 1)


def test_missing_damaged_or_unverifiable_index_loads_as_none(tmp_path):
    assert load_index(tmp_path) is None
    save_index(tmp_path, VectorIndex.build("Flat", 16, "e", np.arange(5), vectors(5), 1))
    data = bytearray((tmp_path / "index.faiss").read_bytes())
    data[len(data) // 2:len(data) // 2 + 32] = b"\x7f" * 32  # still a parsable index, wrong vectors
    (tmp_path / "index.faiss").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="does not match the digest"):
        read_index(tmp_path)
    assert load_index(tmp_path) is None
    (tmp_path / "index.faiss").write_bytes(b"garbage")
    assert load_index(tmp_path) is None
