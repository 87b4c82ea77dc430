"""The shipped reader adapters with the packaged models (slow): found by fingerprint for
qwen2.5-coder-0.5b, refused for gemma3-270m, small, and asked end to end without changing any
stored cache."""

import hashlib
from pathlib import Path

import pytest

from cag.ask import ask
from cag.errors import CagError
from cag.ingest.pipeline import IngestOptions, ingest
from cag.models import load_model
from cag.readers import attach, find_reader, load_reader
from cag.readers.registry import SHIPPED
from cag.retrieval import Retriever
from cag.store import Store

# no reader adapter is shipped until one helps beyond noise (docs/results.md): until then these
# tests report themselves skipped with that reason rather than fail on a missing file
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not list(SHIPPED.glob("*.safetensors")),
                                 reason="no reader adapter is shipped in readers/ yet (docs/readers.md)")]
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "corpus"
QUESTION = "How long can the European lobster grow?"


@pytest.fixture(scope="module")
def qwen(real_cag_home):
    import os
    os.environ["CAG_HOME"] = real_cag_home
    return load_model("qwen2.5-coder-0.5b")


def test_the_shipped_native_reader_is_qwens_alone(qwen):
    found = find_reader("native", qwen.fingerprint, "native", qwen.name)
    assert found.path is not None and found.path.parent == SHIPPED, found.reason
    assert found.path.stat().st_size < 25 * 2 ** 20
    gemma = load_model("gemma3-270m")
    assert find_reader("native", gemma.fingerprint, "native", gemma.name).path is None
    with pytest.raises(CagError, match="was trained for qwen2.5-coder-0.5b"):
        attach(gemma, load_reader(found.path))


def test_ask_through_the_native_reader_leaves_the_store_as_it_was(qwen, tmp_path):
    store_dir = tmp_path / "store"
    ingest([SAMPLES], store_dir, IngestOptions(also_for=("qwen2.5-coder-0.5b",)))
    digest = lambda: {p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
                      for p in sorted((store_dir / "caches").rglob("*.safetensors"))}
    before = digest()
    retriever = Retriever(Store.open(store_dir))
    plain = ask(QUESTION, top_k=3, mode="native", lm=qwen, retriever=retriever, max_new_tokens=16)
    adapted = ask(QUESTION, top_k=3, mode="native+reader", lm=qwen, retriever=retriever, max_new_tokens=16)
    direct = ask(QUESTION, top_k=3, mode="direct", lm=qwen, retriever=retriever, max_new_tokens=16)
    assert "60" in adapted.answer and adapted.context_tokens == plain.context_tokens
    assert digest() == before
    print(plain.answer, "|", adapted.answer, "|", direct.answer)
