"""The split-layer hybrid's mechanics (experiments/probe_split_layer.py) on tiny rotary models: the
generator's upper layers computed over a context from the residual entering the split layer."""

import importlib.util
from pathlib import Path

import pytest
import torch

from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate
from tests.tiny_models import tiny_lm, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Paris is the capital of France; Berlin is the capital of Germany. Ada Lovelace wrote it in 1999."


def probe():
    spec = importlib.util.spec_from_file_location("probe_split_layer", ROOT / "experiments" / "probe_split_layer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def native_context(lm):
    prefix = [tiny_tokenizer().bos_token_id]
    return assemble(lm, [prefill_chunk(lm, TEXT, prefix_ids=prefix)], prefix)


def model(family):
    return tiny_lm(family, sliding_window=512) if family == "gemma3" else tiny_lm(family)


@pytest.mark.parametrize("family,split", [("llama", 1), ("qwen2", 1), ("gemma3", 1), ("gemma3", 2)])
def test_upper_layers_from_the_native_residual_rebuild_the_native_cache(family, split):
    split_layer = probe()
    lm = model(family)
    native = native_context(lm)
    p = native.prefix_tokens
    residual = split_layer.residuals_entering(lm, native.input_ids, p, [split])[split]
    assert residual.shape == (native.length - p, lm.config.hidden_size)
    lower = native_context(lm)
    torch.manual_seed(0)
    for layer in lower.cache.layers[:split]:  # lower layers: a bad translation, prefix untouched
        layer.keys[:, :, p:] += torch.randn_like(layer.keys[:, :, p:])
    hybrid = split_layer.split_context(lm, lower, residual, split)
    for layer, (got, want, given) in enumerate(zip(hybrid.cache.layers, native.cache.layers, lower.cache.layers)):
        expected = given if layer < split else want  # below the split: what it was given; above: native
        torch.testing.assert_close(got.keys, expected.keys, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got.values, expected.values, atol=1e-4, rtol=1e-4)
    exact = split_layer.split_context(lm, native_context(lm), residual, split)
    q_ids = tiny_tokenizer()(" Who wrote it?", add_special_tokens=False)["input_ids"]
    assert (greedy_generate(lm, q_ids, exact, 6).token_ids
            == greedy_generate(lm, q_ids, native_context(lm), 6).token_ids)


def test_a_lower_layer_missing_positions_is_refused():
    split_layer = probe()
    lm = tiny_lm("gemma3")  # sliding window 8: its sliding layers drop the oldest positions
    native = native_context(lm)
    residual = split_layer.residuals_entering(lm, native.input_ids, native.prefix_tokens, [1])[1]
    with pytest.raises(ValueError, match="every position"):
        split_layer.split_context(lm, native, residual, 1)
