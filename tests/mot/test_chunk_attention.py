"""Chunk attention in front of the mixtures: identity at the start, reads the chunk both ways,
round-trips through checkpoints, and leaves translators without it (the shipped ones) as they were."""

import json
from pathlib import Path

import pytest
import torch

from cag.errors import CagError
from cag.kv.chunk_cache import prefill_chunk
from cag.testing import tiny_lm
from mot.checkpoint import load_translator, read_record, save_translator
from mot.chunk_attention import ChunkAttention
from mot.translator import Translator, make_spec, translate_chunk

TEXT = "The European lobster may grow to 60 cm. It is blue in life and red after cooking."
SHIPPED = Path(__file__).resolve().parents[2] / "translators"
# the default set-up's translators (smollm2-135m into the generators `make setup` installs); every
# shipped one, and those make translators-extra puts back, in tests/slow/test_translators_packaged.py
DEFAULT_SET_UP = [SHIPPED / f"smollm2-135m__{g}__mot.safetensors" for g in ("qwen2.5-coder-0.5b", "gemma3-270m")]


def _trained_like(module: torch.nn.Module, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.2)


def test_new_attention_is_the_identity():
    attention = ChunkAttention(in_dim=12, dim=8, heads=2)
    x = torch.randn(5, 12)
    assert torch.equal(attention(x), x)


def test_attention_reads_tokens_on_both_sides():
    attention = ChunkAttention(in_dim=12, dim=8, heads=2)
    _trained_like(attention)
    x = torch.randn(6, 12)
    later_changed, earlier_changed = x.clone(), x.clone()
    later_changed[5] = torch.randn(12)  # (a constant shift would vanish in the layer norm)
    earlier_changed[0] = torch.randn(12)
    with torch.no_grad():
        base = attention(x)
        # token 0 sees a change at token 5 (not causal) and token 5 one at token 0
        assert not torch.allclose(attention(later_changed)[0], base[0])
        assert not torch.allclose(attention(earlier_changed)[5], base[5])


def test_attention_sees_order_within_the_chunk():
    """Rotary positions: the same tokens in another order are not just permuted outputs."""
    attention = ChunkAttention(in_dim=12, dim=8, heads=2)
    _trained_like(attention, seed=3)
    x = torch.randn(6, 12)
    order = torch.tensor([5, 4, 3, 2, 1, 0])
    with torch.no_grad():
        assert not torch.allclose(attention(x[order]), attention(x)[order], atol=1e-4)


def test_translator_with_attention_round_trips_and_has_its_own_fingerprint(tmp_path):
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    torch.manual_seed(0)
    plain = Translator(make_spec("mot", source, target))
    with_attention = Translator(make_spec("mot", source, target, attention_dim=16, attention_heads=2))
    with_attention.load_state_dict(plain.state_dict(), strict=False)  # same mixtures, attention at zero
    chunk = prefill_chunk(source, TEXT, ())
    same = translate_chunk(with_attention, chunk, target)
    want = translate_chunk(plain, chunk, target)
    assert all(torch.equal(a, b) for a, b in zip(same.keys, want.keys))
    assert with_attention.fingerprint() != plain.fingerprint()
    _trained_like(with_attention.layers[0].attention, seed=4)
    changed = translate_chunk(with_attention, chunk, target)
    assert not torch.allclose(changed.keys[0], want.keys[0])
    assert torch.equal(changed.keys[1], want.keys[1])  # only layer 0's attention moved
    path = save_translator(with_attention, tmp_path / "t", dtype="fp32")
    loaded = load_translator(path)
    assert loaded.spec.attention_dim == 16
    assert loaded.fingerprint() == read_record(path)["fingerprint"] != plain.fingerprint()
    again = translate_chunk(loaded, chunk, target)
    assert all(torch.equal(a, b) for a, b in zip(again.keys + again.values, changed.keys + changed.values))


@pytest.mark.parametrize("path", DEFAULT_SET_UP, ids=lambda p: p.stem)
def test_shipped_translators_keep_their_recorded_fingerprints(path):
    """Loading must give the fingerprint recorded when they were saved (translated caches in users'
    stores are named by it); the single paths' records predate chunk attention and token
    embeddings, so those spec fields, absent there, must not change who they are."""
    record = json.loads(path.with_suffix(".json").read_text())
    if record["spec"]["kind"] == "single":
        assert "attention_dim" not in record["spec"] and "target_embeddings" not in record["spec"]
    assert load_translator(path).fingerprint() == record["fingerprint"]


def test_bad_attention_settings_are_refused():
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    with pytest.raises(CagError, match="kind ridge is closed-form"):
        make_spec("ridge", source, target, attention_dim=16)
    with pytest.raises(CagError, match="even width"):
        make_spec("mot", source, target, attention_dim=12, attention_heads=4)
