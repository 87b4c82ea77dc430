"""The batched inference path gives what the per-layer training path gives, and never stale weights."""

import pytest
import torch

from cag.kv.chunk_cache import prefill_chunk, tokenize_chunk
from cag.prompt import prompt_layout
from tests.tiny_models import tiny_lm
from mot.alignment import align
from mot.batched import translate_layers
from mot.token_features import embedding_table, token_features
from mot.translator import Translator, make_spec

TEXT = "The European lobster may grow to 60 cm. It is blue in life and red after cooking."


def _randomize(translator: Translator, seed: int) -> None:
    """Experts start at zero (`down`), which would hide them: give every parameter random values."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in translator.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        for layer in translator.layers:
            for mixture in (layer.k, layer.v):
                mixture.mean.copy_(torch.randn(mixture.mean.shape, generator=gen))
                mixture.scale.copy_(torch.rand(mixture.scale.shape, generator=gen) + 0.5)


def _inputs(source, target):
    chunk = prefill_chunk(source, TEXT, prompt_layout(source.tokenizer).prefix_ids)
    _, t_offsets = tokenize_chunk(target.tokenizer, TEXT)
    weights = align(TEXT, t_offsets, chunk.offsets).weights
    positions = torch.arange(3, 3 + weights.shape[0])
    return chunk, weights, positions


@pytest.mark.parametrize("target_family", ["qwen2", "gpt2", "gemma3", "opt", "llama"])
@pytest.mark.parametrize("kind,embeddings,rank", [
    ("mot", 0, 0), ("single", 0, 0), ("ridge", 0, 0), ("mot", 2, 0), ("mot", 2, 8), ("single", 1, 4)])
def test_batched_path_matches_the_layer_loop(target_family, kind, embeddings, rank):
    source, target = tiny_lm("llama", seed=1), tiny_lm(target_family, seed=2)
    translator = Translator(make_spec(kind, source, target, experts=3, top_k=2,
                                      target_embeddings=embeddings, token_rank=rank))
    _randomize(translator, seed=5)
    chunk, weights, positions = _inputs(source, target)
    ids, _ = tokenize_chunk(target.tokenizer, TEXT)
    tokens = token_features(embedding_table(target), ids, embeddings) if embeddings else None
    with torch.no_grad():
        want_k, want_v, _ = translator(chunk.keys, chunk.values, weights, positions, tokens)
    got_k, got_v = translate_layers(translator, chunk.keys, chunk.values, weights, positions, torch.float32,
                                    tokens=tokens)
    assert len(got_k) == len(want_k) == target.geometry.num_layers
    for got, want in zip(got_k + got_v, want_k + want_v):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def _random_qwen_translator(seed: int):
    """A random MoT translator from tiny llama to tiny qwen2, and the keys of one chunk: a function
    of the dtype giving the translated keys."""
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    translator = Translator(make_spec("mot", source, target))
    _randomize(translator, seed=seed)
    chunk, weights, positions = _inputs(source, target)
    keys = lambda dtype: translate_layers(translator, chunk.keys, chunk.values, weights, positions, dtype)[0]
    return translator, (chunk, weights, positions), keys


def test_batched_path_follows_weights_changed_in_place():
    translator, (chunk, weights, positions), keys = _random_qwen_translator(seed=6)
    before = keys(torch.float32)
    _randomize(translator, seed=7)  # in place, like an optimizer step
    after = keys(torch.float32)
    with torch.no_grad():
        want, _, _ = translator(chunk.keys, chunk.values, weights, positions)
    assert not torch.allclose(before[0], after[0])
    torch.testing.assert_close(after[0], want[0], atol=1e-4, rtol=1e-4)


def test_bfloat16_path_stays_within_its_rounding():
    _, _, keys = _random_qwen_translator(seed=8)
    for a, b in zip(keys(torch.float32), keys(torch.bfloat16)):
        assert b.dtype == torch.float32
        relative = float((a - b).norm() / a.norm())
        # bf16 keeps 8 mantissa bits (~0.4% per element); random weights amplify that through
        # cancellation and top-k flips (the shipped translators: normalized squared error ~6e-6)
        assert 0 < relative < 0.15


def test_chunks_translated_together_equal_one_at_a_time():
    """translate_batch sends several chunks' tokens through the maps at once: per-token maps, so
    the same K/V as translating each alone (absolute positions included); translate_chunks keeps
    each chunk's tokens, metadata and landing position."""
    from mot.batched import translate_batch
    from mot.translator import translate_chunk, translate_chunks

    for family in ("qwen2", "gpt2"):
        source, target = tiny_lm("llama", seed=1), tiny_lm(family, seed=2)
        translator = Translator(make_spec("mot", source, target, target_embeddings=2, token_rank=8)).eval()
        texts = ["Paris is the capital of France.", "Ada Lovelace wrote notes in 1843.", "Mount Elbert is high."]
        chunks = [prefill_chunk(source, text) for text in texts]
        starts = [3, 14, 27]
        items = []
        for chunk, start in zip(chunks, starts):
            t_ids, t_offsets = tokenize_chunk(target.tokenizer, chunk.text)
            items.append((chunk.keys, chunk.values, align(chunk.text, t_offsets, chunk.offsets).weights,
                          torch.arange(start, start + t_ids.numel()), token_features(embedding_table(target), t_ids, 2)))
        together = translate_batch(translator, items, torch.float32)
        for item, (keys, values) in zip(items, together):
            alone_k, alone_v = translate_layers(translator, *item[:4], torch.float32, tokens=item[4])
            for a, b in zip(alone_k + alone_v, keys + values):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        for chunk, start, made in zip(chunks, starts, translate_chunks(translator, chunks, target, position_starts=starts)):
            alone = translate_chunk(translator, chunk, target, position_start=start)
            assert torch.equal(alone.token_ids, made.token_ids) and alone.meta == made.meta
            assert made.meta.position_start == start


def test_a_long_context_is_translated_in_token_batches_with_the_same_result(monkeypatch):
    import mot.translator as module

    assert module.token_batches(list("abcde"), [3, 3, 5, 1, 9], limit=6) == [["a", "b"], ["c", "d"], ["e"]]
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    translator = Translator(make_spec("mot", source, target)).eval()
    chunks = [prefill_chunk(source, text) for text in ("Paris is the capital of France.",
                                                       "Ada Lovelace wrote notes in 1843.", "Mount Elbert is high.")]
    whole = module.translate_chunks(translator, chunks, target)
    monkeypatch.setattr(module, "TRANSLATE_BATCH_TOKENS", 8)  # one chunk per batch
    for one, batched in zip(whole, module.translate_chunks(translator, chunks, target)):
        for a, b in zip(one.keys + one.values, batched.keys + batched.values):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
