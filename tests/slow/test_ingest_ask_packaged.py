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


@pytest.mark.parametrize("question", ["How long can the European lobster grow?", "How tall is Mount Elbert?",
                                      "How many people died because of Hurricane Beatriz?"])
def test_one_shot_native_is_faster_than_direct(store, real_cag_home, question):
    """Each `cag ask` a fresh process: loading and the first forward pass are warm-up, outside TTFT,
    so the generator reading its stored caches beats it reading the text every time."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "CAG_HOME": real_cag_home}  # the models the store fixture converted
    ttft = {}
    for mode in ("native", "direct"):
        proc = subprocess.run([sys.executable, "-m", "cli", "ask", question, "--store", str(store), "--mode", mode,
                               "--json"], capture_output=True, text=True, check=True, env=env)
        timings = json.loads(proc.stdout.strip().splitlines()[-1])["timings_ms"]
        assert timings["warmup"] > 0
        ttft[mode] = timings["ttft"]
    print(f"{question} one-shot TTFT: {ttft}")
    assert ttft["native"] < ttft["direct"]
