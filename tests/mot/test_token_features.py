"""The target's token embeddings as translator input: shapes, the shift, exact layer 0, use in ask."""

import pytest
import torch

from cag.errors import CagError
from cag.kv.chunk_cache import prefill_chunk, tokenize_chunk
from cag.prompt import prompt_layout
from tests.tiny_models import tiny_lm
from mot.alignment import align
from mot.checkpoint import load_translator, read_record, save_translator
from mot.features import flatten_heads
from mot.training.losses import normalized_mse
from mot.training.ridge import RidgeFit
from mot.token_features import embedding_table, token_features
from mot.translator import Translator, make_spec, translate_chunk

TEXTS = ["The European lobster may grow to 60 cm. It is blue in life and red after cooking.",
         "In 1998 the bridge was renamed after Alfred Nobel, who had paid for its first span.",
         "Bohemond, the son of Robert Guiscard, led the Normans of southern Italy east in 1096.",
         "Cyclosporin was isolated from a soil fungus found in Norway and approved in 1983.",
         "The lighthouse stands 42 metres tall and its lamp can be seen from 30 kilometres away."]


def test_features_hold_each_token_and_the_ones_before_it():
    lm = tiny_lm("qwen2", seed=2)
    ids, _ = tokenize_chunk(lm.tokenizer, TEXTS[0])
    table = embedding_table(lm)
    f = token_features(table, ids, 3)
    width = table.shape[1]
    assert f.shape == (ids.numel(), 3 * width)
    own, prev, prev2 = f[:, :width], f[:, width:2 * width], f[:, 2 * width:]
    torch.testing.assert_close(own.pow(2).mean(-1), torch.ones(ids.numel()), atol=1e-3, rtol=0)
    torch.testing.assert_close(prev[1:], own[:-1])
    torch.testing.assert_close(prev2[2:], own[:-2])
    assert torch.equal(prev[0], torch.zeros(width)) and torch.equal(prev2[:2], torch.zeros(2, width))
    assert token_features(table, ids, 0).shape == (ids.numel(), 0)


def _layer0_error(family: str, embeddings: int, rank: int = 0, translator_out: list | None = None) -> tuple[float, float]:
    """Held-out nMSE of a ridge fit's layer-0 K and V, trained on four texts, tested on the fifth."""
    source, target = tiny_lm("llama", seed=1), tiny_lm(family, seed=2)
    translator = Translator(make_spec("ridge", source, target, target_embeddings=embeddings, token_rank=rank))
    if translator_out is not None:
        translator_out.append(translator)
    s_prefix, t_prefix = prompt_layout(source.tokenizer).prefix_ids, prompt_layout(target.tokenizer).prefix_ids
    chunks = []
    for text in TEXTS:
        s, t = prefill_chunk(source, text, s_prefix), prefill_chunk(target, text, t_prefix)
        weights = align(text, t.offsets, s.offsets).weights
        tokens = token_features(embedding_table(target), t.token_ids, embeddings) if embeddings else None
        chunks.append((s, t, weights, tokens))
    fit = RidgeFit(translator)
    for s, t, weights, tokens in chunks[:-1]:
        fit.add(s.keys, s.values, weights, t.keys, t.values, tokens=tokens)
    fit.solve(lam=1e-6)
    s, t, weights, tokens = chunks[-1]
    with torch.no_grad():
        keys, values, _ = translator(s.keys, s.values, weights, tokens=tokens)
    return (float(normalized_mse(flatten_heads(keys[0]), flatten_heads(t.keys[0].float()))),
            float(normalized_mse(flatten_heads(values[0]), flatten_heads(t.values[0].float()))))


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_ridge_reproduces_layer_0_from_the_target_embeddings(family):
    """A pre-norm target's layer-0 K/V are linear maps of its normalized input embeddings: with
    them the closed-form fit gets layer 0 of an unseen text right; from source K/V alone it cannot."""
    k_with, v_with = _layer0_error(family, embeddings=1)
    k_without, v_without = _layer0_error(family, embeddings=0)
    assert k_with < 0.02 and v_with < 0.02
    assert k_without > 10 * k_with and v_without > 10 * v_with


def test_a_token_projection_keeps_most_of_layer_0_in_fewer_features():
    """--token-rank: one projection of the embedding features for every layer, fitted in closed
    form (reduced-rank ridge). At the full width it still reproduces layer 0; narrower, it gives
    up some accuracy, yet stays far ahead of no embeddings; its outputs are whitened."""
    width = embedding_table(tiny_lm("qwen2", seed=2)).shape[1]
    made = []
    k_full, v_full = _layer0_error("qwen2", embeddings=1, rank=width, translator_out=made)
    k_narrow, v_narrow = _layer0_error("qwen2", embeddings=1, rank=width // 4)
    k_none, v_none = _layer0_error("qwen2", embeddings=0)
    assert k_full < 0.02 and v_full < 0.02
    assert k_full <= k_narrow < k_none and v_full <= v_narrow < v_none
    translator = made[0]
    assert translator.token_projection.shape == (width, width)
    assert translator.spec.in_dim == Translator(make_spec("ridge", *(tiny_lm(f, seed=s) for f, s in
                                                (("llama", 1), ("qwen2", 2))))).spec.in_dim + width
    target = tiny_lm("qwen2", seed=2)
    ids = torch.cat([tokenize_chunk(target.tokenizer, t)[0] for t in TEXTS[:-1]])
    z = token_features(embedding_table(target), ids, 1) @ translator.token_projection.detach()
    cov = torch.cov(z.T)
    assert float((cov.diagonal() - 1).abs().max()) < 0.2  # (trained on these tokens, chunk by chunk)
    with pytest.raises(CagError, match="set --target-embeddings too"):
        make_spec("ridge", tiny_lm("llama", seed=1), target, token_rank=4)


def test_translate_chunk_feeds_the_embeddings_and_refuses_without_them():
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    chunk = prefill_chunk(source, TEXTS[1], prompt_layout(source.tokenizer).prefix_ids)
    prefix = prompt_layout(target.tokenizer).prefix_ids
    translator = Translator(make_spec("mot", source, target, target_embeddings=2))
    assert translator.spec.in_dim == (Translator(make_spec("mot", source, target)).spec.in_dim
                                      + 2 * embedding_table(target).shape[1])
    out = translate_chunk(translator, chunk, target, prefix)
    assert [k.shape for k in out.keys] == [k.shape for k in prefill_chunk(target, TEXTS[1], prefix).keys]
    _, t_offsets = tokenize_chunk(target.tokenizer, TEXTS[1])
    weights = align(TEXTS[1], t_offsets, chunk.offsets).weights
    with pytest.raises(CagError, match="token embeddings"):
        translator(chunk.keys, chunk.values, weights)
    with pytest.raises(CagError, match="--target-embeddings"):
        make_spec("mot", source, target, target_embeddings=-1)


def test_a_saved_translator_with_embeddings_reloads_and_translates_alike(tmp_path):
    """The setting travels in the checkpoint's spec (shipped translators without it keep their
    fingerprints: tests/mot/test_translator.py)."""
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    chunk = prefill_chunk(source, TEXTS[2], prompt_layout(source.tokenizer).prefix_ids)
    translator = Translator(make_spec("single", source, target, target_embeddings=2))
    with torch.no_grad():
        for p in translator.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    path = save_translator(translator, tmp_path / "t", dtype="fp32")
    loaded = load_translator(path)
    assert loaded.spec.target_embeddings == 2 and loaded.spec.embedding_dim == embedding_table(target).shape[1]
    assert loaded.fingerprint() == read_record(path)["fingerprint"]
    assert loaded.fingerprint() != Translator(make_spec("single", source, target)).fingerprint()
    before, after = translate_chunk(translator, chunk, target), translate_chunk(loaded, chunk, target)
    for a, b in zip(before.keys + before.values, after.keys + after.values):
        torch.testing.assert_close(a, b)
