"""Exact KV round trips on tiny models of all five families."""

import pytest
import torch

from cag.errors import CagError
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk, run_prefill
from cag.kv.generate import forward_new_tokens, greedy_generate
from cag.kv.rotary import Rotary
from cag.kv.serde import load_chunk_cache, save_chunk_cache
from tests.tiny_models import FAMILIES, tiny_lm, tiny_tokenizer

ROTARY = ("llama", "qwen2", "gemma3")
TEXT = "Paris is the capital of France; Berlin is the capital of Germany. The quick brown fox jumps."
MORE = ["Ada Lovelace wrote the report in 1999.", "Numbers like 42 and 2048 appear in text.",
        "The lazy dog sleeps."]


def question_ids():
    return tiny_tokenizer()(" Question: who wrote the report? Answer:", add_special_tokens=False).input_ids


def full_prefill_logits(lm, ids, last):
    return lm.model(input_ids=torch.tensor(ids)[None]).logits[0, -last:]


@pytest.fixture(params=FAMILIES)
def lm(request):
    return tiny_lm(request.param)


@pytest.mark.parametrize("with_prefix", [True, False])
def test_stored_chunk_then_question_equals_full_prefill(lm, tmp_path, with_prefix):
    prefix = [tiny_tokenizer().bos_token_id] if with_prefix else []
    chunk = prefill_chunk(lm, TEXT, prefix_ids=prefix)
    save_chunk_cache(chunk, tmp_path / "c.safetensors", dtype="fp32")
    loaded = load_chunk_cache(tmp_path / "c.safetensors")
    context = assemble(lm, [loaded], prefix_ids=prefix)
    q = question_ids()
    got = forward_new_tokens(lm, context.cache, torch.tensor(q), context.length, logits_to_keep=0)
    want = full_prefill_logits(lm, prefix + chunk.token_ids.tolist() + q, len(q))
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_generation_from_cache_equals_generation_from_prompt(lm):
    prefix = [tiny_tokenizer().bos_token_id]
    chunk = prefill_chunk(lm, TEXT, prefix_ids=prefix)
    q = question_ids()
    cached = greedy_generate(lm, q, assemble(lm, [chunk], prefix_ids=prefix), max_new_tokens=8)
    direct = greedy_generate(lm, prefix + chunk.token_ids.tolist() + q, None, max_new_tokens=8)
    assert cached.token_ids == direct.token_ids
    assert cached.ttft_seconds <= cached.total_seconds


@pytest.mark.parametrize("family", ROTARY)
def test_chunk_moved_to_offset_equals_chunk_prefilled_there(family):
    lm = tiny_lm(family)
    at_zero = prefill_chunk(lm, TEXT, position_start=0)
    at_p = prefill_chunk(lm, TEXT, position_start=37)
    rotary = Rotary(lm.model, lm.geometry)
    ids = at_zero.token_ids
    raw_keys, raw_values = run_prefill(lm.model, ids, torch.arange(37, 37 + ids.numel()))
    for layer in range(lm.geometry.num_layers):
        moved = rotary.apply(at_zero.keys[layer], torch.arange(37, 37 + ids.numel()), layer)
        torch.testing.assert_close(moved, raw_keys[layer], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(at_zero.keys[layer], at_p.keys[layer], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(at_zero.values[layer], raw_values[layer], atol=1e-5, rtol=1e-4)
    # and the rotation is not the identity: position 37 differs from position 0
    assert not torch.allclose(raw_keys[0], run_prefill(lm.model, ids, torch.arange(ids.numel()))[0][0])


def test_rotary_remove_then_apply_is_identity():
    lm = tiny_lm("gemma3")  # local and global layers use different bases
    rotary = Rotary(lm.model, lm.geometry)
    keys = torch.randn(1, 20, lm.geometry.head_dim)
    pos = torch.arange(100, 120)
    for layer in range(lm.geometry.num_layers):
        torch.testing.assert_close(rotary.remove(rotary.apply(keys, pos, layer), pos, layer), keys,
                                   atol=1e-5, rtol=1e-5)
    cos_local, _ = rotary.cos_sin(pos, 0)
    cos_global, _ = rotary.cos_sin(pos, 2)
    assert not torch.allclose(cos_local, cos_global)


@pytest.mark.parametrize("family", ROTARY)
def test_multi_chunk_assembly_has_expected_length_and_positions(family):
    lm = tiny_lm(family)
    prefix = [tiny_tokenizer().bos_token_id]
    chunks = [prefill_chunk(lm, text) for text in MORE]
    context = assemble(lm, chunks, prefix_ids=prefix)
    lengths = [c.num_tokens for c in chunks]
    assert context.length == 1 + sum(lengths)
    assert context.chunk_spans == [(1, 1 + lengths[0]), (1 + lengths[0], 1 + sum(lengths[:2])),
                                   (1 + sum(lengths[:2]), 1 + sum(lengths))]
    assert context.input_ids.tolist() == prefix + sum((c.token_ids.tolist() for c in chunks), [])
    assert context.cache.get_seq_length() == context.length
    rotary = Rotary(lm.model, lm.geometry)
    for layer, cache_layer in enumerate(context.cache.layers):
        keys = cache_layer.keys[0]
        if lm.geometry.is_sliding(layer):  # sliding layers keep window - 1 tokens
            assert keys.shape[1] == min(context.length, lm.geometry.sliding_window - 1)
            continue
        assert keys.shape[1] == context.length
        start, end = context.chunk_spans[1]
        unrotated = rotary.remove(keys[:, start:end], torch.arange(start, end), layer)
        torch.testing.assert_close(unrotated, chunks[1].keys[layer], atol=1e-5, rtol=1e-4)


def test_gemma_sliding_layers_record_true_length():
    lm = tiny_lm("gemma3")
    context = assemble(lm, [prefill_chunk(lm, TEXT)], prefix_ids=[tiny_tokenizer().bos_token_id])
    sliding = [layer for i, layer in enumerate(context.cache.layers) if lm.geometry.is_sliding(i)]
    assert sliding and all(layer.cumulative_length == context.length for layer in sliding)
    assert context.length > lm.geometry.sliding_window


@pytest.mark.parametrize("family", ["gpt2", "opt"])
def test_absolute_models_use_chunks_prefilled_at_their_offset(family):
    lm = tiny_lm(family)
    prefix = [tiny_tokenizer().bos_token_id]
    first = prefill_chunk(lm, MORE[0], prefix_ids=prefix)
    second = prefill_chunk(lm, MORE[1], prefix_ids=prefix, position_start=1 + first.num_tokens)
    context = assemble(lm, [first, second], prefix_ids=prefix)
    assert context.length == 1 + first.num_tokens + second.num_tokens
    with pytest.raises(CagError, match="absolute positions"):
        assemble(lm, [second, first], prefix_ids=prefix)


def test_single_chunk_at_offset_matches_full_prefill_for_absolute_model():
    lm = tiny_lm("opt")
    prefix = [tiny_tokenizer().bos_token_id]
    first = prefill_chunk(lm, MORE[0], prefix_ids=prefix)
    q = question_ids()
    context = assemble(lm, [first], prefix_ids=prefix)
    got = forward_new_tokens(lm, context.cache, torch.tensor(q), context.length, logits_to_keep=0)
    want = full_prefill_logits(lm, prefix + first.token_ids.tolist() + q, len(q))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", ["gpt2", "opt"])
def test_assembly_beyond_max_positions_is_refused(family):
    lm = tiny_lm(family)  # tiny configs allow 128 positions
    long_text = " ".join(MORE * 12)
    with pytest.raises(CagError, match="at most 128"):
        prefill_chunk(lm, long_text)
    chunk = prefill_chunk(lm, MORE[0])
    with pytest.raises(CagError, match="at most 128"):
        assemble(lm, [chunk] * 40)


def test_assembling_another_models_chunk_is_refused():
    chunk = prefill_chunk(tiny_lm("llama", seed=1), TEXT)
    with pytest.raises(CagError, match="prefilled by"):
        assemble(tiny_lm("llama", seed=2), [chunk])


def test_stop_tokens_are_the_models_end_tokens_found_once(lm, monkeypatch):
    """EOS of the generation config and the tokenizer plus the special end-of-turn tokens, computed
    once per loaded model (building the vocabulary per answer cost qwen2.5 120-200 ms of every TTFT)."""
    from cag.kv.generate import _END_TOKENS, stop_token_ids

    tokenizer = lm.tokenizer
    vocab = tokenizer.get_vocab()
    expected = {tokenizer.eos_token_id, lm.model.generation_config.eos_token_id} - {None}
    expected |= {vocab[t] for t in _END_TOKENS if t in vocab and t in tokenizer.all_special_tokens}
    assert stop_token_ids(lm) == expected and expected
    for lookup in ("convert_tokens_to_ids", "get_vocab"):
        monkeypatch.setattr(type(tokenizer), lookup, lambda *a: pytest.fail("looked up again"))
    assert stop_token_ids(lm) == expected


def test_generation_runs_one_forward_per_generated_token(lm, monkeypatch):
    """The prompt's forward gives the first token and each later forward the next: n tokens, n
    forwards (none for a token past the limit)."""
    import cag.kv.generate as generate

    calls = []
    real = generate.forward_new_tokens
    monkeypatch.setattr(generate, "stop_token_ids", lambda lm: set())  # a random tiny model may say EOS
    monkeypatch.setattr(generate, "forward_new_tokens", lambda *a, **k: calls.append(1) or real(*a, **k))
    generation = generate.greedy_generate(lm, question_ids(), None, 4)
    assert len(generation.token_ids) == 4 and len(calls) == 4


@pytest.mark.parametrize("family", FAMILIES)
def test_a_long_prefill_read_in_chunks_gives_the_logits_and_cache_of_one_forward(family, monkeypatch):
    """A direct-mode prompt longer than PREFILL_CHUNK is read a chunk per forward: the same last
    logits and the same cache as one forward over all of it (sliding windows included)."""
    import cag.kv.generate as generate
    from transformers import DynamicCache

    lm = tiny_lm(family, sliding_window=16) if family == "gemma3" else tiny_lm(family)
    torch.manual_seed(0)
    ids = torch.randint(5, 200, (45,))
    whole_cache, chunked_cache = DynamicCache(config=lm.config), DynamicCache(config=lm.config)
    whole = forward_new_tokens(lm, whole_cache, ids, 0, logits_to_keep=3)
    forwards = []
    monkeypatch.setattr(generate, "PREFILL_CHUNK", 8)
    real = lm.model.forward
    monkeypatch.setattr(lm.model, "forward", lambda *a, **k: forwards.append(k["input_ids"].shape[1]) or real(*a, **k))
    chunked = forward_new_tokens(lm, chunked_cache, ids, 0, logits_to_keep=3)
    assert forwards == [8, 8, 8, 8, 8, 5]  # the last forward keeps the 3 tokens whose logits are asked
    torch.testing.assert_close(chunked, whole, atol=1e-4, rtol=1e-4)
    assert chunked_cache.get_seq_length() == whole_cache.get_seq_length()
    for a, b in zip(chunked_cache.layers, whole_cache.layers):
        torch.testing.assert_close(a.keys, b.keys, atol=1e-4, rtol=1e-4)
