"""Real offline models (slow): answers from a reloaded fp16 cache equal answers from the prompt.

Run with `pytest -m slow`. Converted models are kept in $CAG_HOME_SLOW when set (else converted
once per session, about 2.5 minutes for the three models).
"""

import pytest
import torch

from cag.demo import demo_data
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate
from cag.kv.serde import load_chunk_cache, save_chunk_cache
from cag.models import load_model
from cag.prompt import prompt_layout

PACKAGED = ["smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m"]
pytestmark = pytest.mark.slow


@pytest.fixture
def real_home(real_cag_home, monkeypatch):
    monkeypatch.setenv("CAG_HOME", real_cag_home)


@pytest.mark.parametrize("name", PACKAGED)
def test_reloaded_fp16_cache_answers_like_the_full_prompt(name, real_home, tmp_path):
    lm = load_model(name)
    data = demo_data()
    layout = prompt_layout(lm.tokenizer)
    chunk = prefill_chunk(lm, data["passage"], prefix_ids=layout.prefix_ids)
    save_chunk_cache(chunk, tmp_path / "c.safetensors", dtype="fp16")
    stored = load_chunk_cache(tmp_path / "c.safetensors")
    for item in data["questions"]:
        q = layout.question_ids(lm.tokenizer, item["question"])
        cached = greedy_generate(lm, q, assemble(lm, [stored], layout.prefix_ids), 16)
        direct = greedy_generate(lm, list(layout.prefix_ids) + stored.token_ids.tolist() + q, None, 16)
        print(f"{name} | {item['question']} | cache: {cached.text!r} | prompt: {direct.text!r}")
        assert cached.text == direct.text


@pytest.mark.parametrize("name", PACKAGED)
def test_converted_folder_loads_fast(name, real_home):
    lm = load_model(name)  # converts on the first call of the session
    again = load_model(name)
    print(f"{name}: load from converted folder {again.load_seconds:.2f} s")
    assert again.fingerprint == lm.fingerprint
    assert again.load_seconds < 5.0


def test_converted_folder_gives_the_gguf_logits(real_home):
    from transformers import AutoModelForCausalLM

    from cag.models.packaged import gguf_path

    lm = load_model("smollm2-135m")
    gguf = gguf_path("smollm2-135m")
    raw = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    ids = lm.tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(lm.model(ids).logits, raw(ids).logits, atol=0, rtol=0)


@pytest.mark.parametrize("name", PACKAGED)
def test_identity_without_weights_is_the_loaded_models(name, real_home):
    """What a Ray driver reads (config, weight files, tokenizer) names the model its workers load."""
    from cag.models.loading import model_identity
    identity, lm = model_identity(name), load_model(name)
    assert (identity.fingerprint, identity.tokenizer_fingerprint) == (lm.fingerprint, lm.tokenizer_fingerprint)
