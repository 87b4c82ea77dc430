"""The scaled modes' factor on the context's share of attention (cag.kv.generate.context_mask,
cag.modes.scaled), on tiny rotary models."""

import math

import pytest
import torch

from cag.errors import CagError
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import forward_new_tokens, greedy_generate
from cag.models.layers import attention_modules
from cag.modes.base import ContextRequest, ModeOptions
from cag.modes.scaled import ScaledMode
from cag.testing import tiny_lm, tiny_tokenizer

TEXTS = ["Paris is the capital of France; Berlin is the capital of Germany.",
         " Ada Lovelace wrote the report in 1999 with numbers like 42."]


def split_context(lm):
    prefix = [tiny_tokenizer().bos_token_id]
    return assemble(lm, [prefill_chunk(lm, text, prefix_ids=prefix) for text in TEXTS], prefix)


def question():
    return torch.tensor(tiny_tokenizer()(" Who wrote it?", add_special_tokens=False).input_ids)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_the_scaled_path_with_a_scale_of_one_reads_as_the_plain_one(family):
    # the explicit mask must be the causal one sdpa uses, aligned to the end of the cache
    lm = tiny_lm(family)
    plain, masked = split_context(lm), split_context(lm)
    q = question()
    want = forward_new_tokens(lm, plain.cache, q, plain.length, logits_to_keep=0)
    got = forward_new_tokens(lm, masked.cache, q, masked.length, logits_to_keep=0,
                             scaled_span=(masked.prefix_tokens, masked.length, 0.0))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def first_layer_weights(lm, context, q, scaled_span):
    """(1, H, T, L + T) the first layer's attention weights of `q` read after `context` (eager)."""
    weights = []
    hook = attention_modules(lm.model)[0].register_forward_hook(lambda m, a, out: weights.append(out[1]))
    lm.model.set_attn_implementation("eager")
    try:
        forward_new_tokens(lm, context.cache, q, context.length, scaled_span=scaled_span)
    finally:
        lm.model.set_attn_implementation("sdpa")
        hook.remove()
    return weights[0].float()


def test_the_scale_multiplies_the_context_attention_against_the_rest():
    # the first layer's queries are the same either way, so each weight over the context changes by
    # scale / Z and every other weight by 1 / Z (Z: the row's new normaliser)
    lm, scale = tiny_lm("qwen2"), 0.3
    q = question()
    base, scaled = split_context(lm), split_context(lm)
    p, length = base.prefix_tokens, base.length
    w = first_layer_weights(lm, base, q, None)
    ws = first_layer_weights(lm, scaled, q, (p, length, math.log(scale)))
    ratio = ws / w  # (1, H, T, L + T); the masked future is 0 / 0
    context_ratio = ratio[..., p:length]
    prefix_ratio = ratio[..., :p]
    torch.testing.assert_close(context_ratio / prefix_ratio, torch.full_like(context_ratio, scale), rtol=1e-3, atol=1e-4)
    assert float(ws[..., p:length].sum(-1).mean()) < float(w[..., p:length].sum(-1).mean())


def request(lm, context_scale):
    return ContextRequest(store=None, lm=lm, layout=None, rows=[], question_ids=question().tolist(),
                          options=ModeOptions(context_scale=context_scale))


class _Fixed(ScaledMode):
    """A scaled mode over a fixed context (the base mode's build is not what is tested here)."""

    def __init__(self, context):
        super().__init__("fixed-scaled", "native")
        self.context = context

    @property
    def base(self):
        from cag.modes.base import BuiltContext

        context = self.context
        return type("Base", (), {"build": lambda _, r: BuiltContext(context, [], context.length)})()


def test_a_scaled_mode_sets_the_log_scale_and_the_answer_reads_it():
    lm = tiny_lm("qwen2")
    built = _Fixed(split_context(lm)).build(request(lm, 0.05))
    assert built.context.log_scale == pytest.approx(math.log(0.05))
    assert built.context.scaled_span == (built.context.prefix_tokens, built.context.length, math.log(0.05))
    plain = split_context(lm)
    q = question()
    scaled_logits = forward_new_tokens(lm, built.context.cache, q, built.context.length,
                                       scaled_span=built.context.scaled_span)
    plain_logits = forward_new_tokens(lm, plain.cache, q, plain.length)
    assert not torch.allclose(scaled_logits, plain_logits, atol=1e-3)
    # generation reads every answer token with the scale too: the same tokens as a manual scaled loop
    generated = greedy_generate(lm, q.tolist(), _Fixed(split_context(lm)).build(request(lm, 0.05)).context,
                                max_new_tokens=6)
    manual = _Fixed(split_context(lm)).build(request(lm, 0.05)).context
    logits, pos, tokens = forward_new_tokens(lm, manual.cache, q, manual.length, scaled_span=manual.scaled_span), \
        manual.length + q.numel(), []
    for _ in range(len(generated.token_ids)):
        tokens.append(int(logits[-1].argmax()))
        logits = forward_new_tokens(lm, manual.cache, torch.tensor(tokens[-1:]), pos, scaled_span=manual.scaled_span)
        pos += 1
    assert generated.token_ids == tokens


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_scale_that_is_not_a_positive_number_is_refused(bad):
    lm = tiny_lm("qwen2")
    with pytest.raises(CagError, match="context-scale"):
        _Fixed(split_context(lm)).build(request(lm, bad))


def test_a_generator_with_sliding_window_layers_is_refused():
    lm = tiny_lm("gemma3")  # its sliding window would drop positions the mask spans
    with pytest.raises(CagError, match="sliding-window"):
        _Fixed(split_context(lm)).build(request(lm, 0.5))


def test_a_single_chunk_is_read_unscaled():
    # one chunk prefilled after the prefix is exact: nothing between chunks to correct
    lm = tiny_lm("qwen2")
    prefix = [tiny_tokenizer().bos_token_id]
    one = assemble(lm, [prefill_chunk(lm, " ".join(TEXTS), prefix_ids=prefix)], prefix)
    built = _Fixed(one).build(request(lm, 0.05))
    assert built.context.log_scale == 0.0 and built.context.scaled_span is None
