"""Ingest the sample corpus and ask with the packaged models (slow: about 2-3 minutes)."""

from pathlib import Path

import pytest

from cag.ask import ask
from cag.ingest.pipeline import IngestOptions, ingest
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "corpus"


@pytest.fixture(scope="module")
def store(real_cag_home, tmp_path_factory):
    import os
    os.environ["CAG_HOME"] = real_cag_home
    path = tmp_path_factory.mktemp("packaged") / "store"
    report = ingest([SAMPLES], path, IngestOptions(also_for=("qwen2.5-coder-0.5b",)))
    print(f"ingest: {report.chunks_total} chunks, {report.tokens_total} tokens, {report.seconds:.0f} s")
    assert report.files_ingested == 5 and not report.skipped
    return path


@pytest.mark.parametrize("question,expected", [
    ("How long can the European lobster grow?", "60"),
    ("What is the elevation of Mount Elbert in feet?", "440"),
])
def test_native_answers_like_direct_with_one_chunk(store, question, expected):
    lm = load_model("qwen2.5-coder-0.5b")
    retriever = Retriever(Store.open(store))
    native = ask(question, top_k=1, mode="native", max_new_tokens=24, lm=lm, retriever=retriever)
    direct = ask(question, top_k=1, mode="direct", max_new_tokens=24, lm=lm, retriever=retriever)
    print(f"{question} | native: {native.answer!r} ({native.timings_ms['ttft']:.0f} ms) | "
          f"direct: {direct.answer!r} ({direct.timings_ms['ttft']:.0f} ms)")
    assert native.answer == direct.answer
    assert expected in native.answer
