"""The larger packaged generator qwen2.5-coder-1.5b (slow; installed only by `make setup-large`).

The first run joins its 22 GGUF parts and converts it (about 75 s and 9 GiB of memory in fp32);
set $CAG_HOME_SLOW to keep the converted folder between sessions.
"""

import pytest

from cag.demo import demo_data
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate
from cag.models import load_model
from cag.models.packaged import PACKAGES, is_installed
from cag.prompt import prompt_layout

NAME = "qwen2.5-coder-1.5b"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not is_installed(NAME), reason=f"{NAME} is not installed: {PACKAGES[NAME][0]}")]


def test_the_large_generator_answers_from_its_cache_and_from_the_text(real_cag_home, monkeypatch):
    monkeypatch.setenv("CAG_HOME", real_cag_home)
    lm = load_model(NAME)
    assert lm.geometry.num_layers == 28 and lm.config.hidden_size == 1536
    assert lm.config.num_key_value_heads == 2 and lm.geometry.head_dim == 128
    data = demo_data()
    layout = prompt_layout(lm.tokenizer)
    chunk = prefill_chunk(lm, data["passage"], prefix_ids=layout.prefix_ids)
    item = data["questions"][0]  # Which NFL team represented the AFC at Super Bowl 50?
    q = layout.question_ids(lm.tokenizer, item["question"])
    cached = greedy_generate(lm, q, assemble(lm, [chunk], layout.prefix_ids), 12)
    direct = greedy_generate(lm, list(layout.prefix_ids) + chunk.token_ids.tolist() + q, None, 12)
    print(f"{NAME}: cache {cached.text!r} | prompt {direct.text!r} | loaded in {lm.load_seconds:.1f} s")
    assert item["answers"][0] in cached.text and cached.text == direct.text
    again = load_model(NAME)  # the converted folder reloads in seconds
    assert again.fingerprint == lm.fingerprint and again.load_seconds < 30


def test_the_homogeneous_pair_aligns_as_the_identity(real_cag_home, monkeypatch):
    """qwen2.5-coder-0.5b and -1.5b share their tokenizer: every 1.5B token reads exactly the 0.5B
    token at its place, so a translator between them learns no alignment."""
    import torch
    from transformers import PreTrainedTokenizerFast

    from cag.kv.chunk_cache import tokenize_chunk
    from cag.models.convert import converted_for
    from cag.models.packaged import gguf_path
    from mot.alignment import align

    monkeypatch.setenv("CAG_HOME", real_cag_home)
    small, large = (PreTrainedTokenizerFast.from_pretrained(converted_for(n, lambda n=n: gguf_path(n)))
                    for n in ("qwen2.5-coder-0.5b", NAME))
    assert small.get_vocab() == large.get_vocab()
    text = demo_data()["passage"] + "\n  Tabs\tand “quotes”, naïve café, 東京 and 1,234.5."
    (s_ids, s_off), (l_ids, l_off) = tokenize_chunk(small, text), tokenize_chunk(large, text)
    assert torch.equal(s_ids, l_ids)
    alignment = align(text, l_off, s_off)
    assert torch.equal(alignment.weights, torch.eye(len(l_ids))) and alignment.nearest == 0


@pytest.mark.parametrize("encoder_name", ["qwen2.5-coder-0.5b", "smollm2-135m"])
def test_the_shipped_translators_answer_from_the_encoders_store(encoder_name, real_cag_home, monkeypatch, tmp_path):
    """The shipped MoT translators into the 1.5B (from the homogeneous qwen2.5-coder-0.5b and from
    the default encoder smollm2-135m) are found by both fingerprints and let the 1.5B answer the
    sample corpus's question from the encoder's stored caches, as it does from the text."""
    from pathlib import Path

    from cag.ask import ask
    from cag.ingest.pipeline import IngestOptions, ingest
    from cag.retrieval import Retriever
    from cag.store import Store
    from cag.translations import TranslationId
    from mot.registry import SHIPPED, find_translator

    monkeypatch.setenv("CAG_HOME", real_cag_home)
    encoder, lm = load_model(encoder_name), load_model(NAME)
    found = find_translator(encoder.fingerprint, lm.fingerprint, TranslationId(encoder_name, NAME, "mot"))
    assert found.path is not None and found.path.parent == SHIPPED, found.reason
    store = tmp_path / "store"
    ingest([Path(__file__).resolve().parents[2] / "samples" / "corpus"], store,
           IngestOptions(encoder=encoder_name))
    retriever = Retriever(Store.open(store))
    question = "How long can the European lobster grow?"
    translated = ask(question, top_k=1, mode="translated", max_new_tokens=16, lm=lm, retriever=retriever)
    direct = ask(question, top_k=1, mode="direct", max_new_tokens=16, lm=lm, retriever=retriever)
    print(f"translated: {translated.answer!r} | direct: {direct.answer!r}")
    assert translated.mode == "translated" and translated.timings_ms["translate"] > 0
    assert translated.context_tokens == direct.context_tokens
    assert "60 cm" in direct.answer and "60 cm" in translated.answer
