"""Selective recompute (blend) of assembled contexts on tiny rotary models."""

import pytest
import torch

from cag.errors import CagError
from cag.kv.assemble import assemble
from cag.kv.blend import QUERY_TOKENS, blend, query_scores
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate, read_after
from cag.models.layers import attention_modules
from tests.tiny_models import tiny_lm, tiny_tokenizer

TEXTS = ["Paris is the capital of France; Berlin is the capital of Germany.",
         "Ada Lovelace wrote the report in 1999 with numbers like 42."]
ROTARY = ("llama", "qwen2", "gemma3")


def model(family):
    # the tiny gemma3's sliding window (8) would drop positions; blend needs them all
    return tiny_lm(family, sliding_window=512) if family == "gemma3" else tiny_lm(family)


def contexts(lm):
    """(native: one chunk prefilled whole, exact; split: the same text as two independent chunks)."""
    prefix = [tiny_tokenizer().bos_token_id]
    whole = prefill_chunk(lm, " ".join(TEXTS), prefix_ids=prefix)
    parts = [prefill_chunk(lm, TEXTS[0], prefix_ids=prefix), prefill_chunk(lm, " " + TEXTS[1], prefix_ids=prefix)]
    return assemble(lm, [whole], prefix), assemble(lm, parts, prefix)


def kv(context):
    return [(layer.keys.clone(), layer.values.clone()) for layer in context.cache.layers]


def assert_same_kv(a, b, atol=1e-4):
    for (ka, va), (kb, vb) in zip(a, b):
        torch.testing.assert_close(ka, kb, atol=atol, rtol=1e-4)
        torch.testing.assert_close(va, vb, atol=atol, rtol=1e-4)


def eager_attention(lm, ids):
    """[(1, H, T, T)] every layer's attention weights from one eager forward over `ids`, no cache."""
    weights = []
    hooks = [attention.register_forward_hook(lambda module, args, out: weights.append(out[1]))
             for attention in attention_modules(lm.model)]
    lm.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            lm.model(input_ids=ids[None])
    finally:
        lm.model.set_attn_implementation("sdpa")
        for hook in hooks:
            hook.remove()
    return weights


@pytest.mark.parametrize("family", ROTARY)
def test_recomputing_every_token_gives_the_native_cache(family):
    lm = model(family)
    native, _ = contexts(lm)
    want = kv(native)
    noisy, _ = contexts(lm)
    torch.manual_seed(0)
    for layer in noisy.cache.layers:  # a bad translation of every context token, prefix untouched
        p = noisy.prefix_tokens
        layer.keys[:, :, p:] += torch.randn_like(layer.keys[:, :, p:])
        layer.values[:, :, p:] += torch.randn_like(layer.values[:, :, p:])
    _, count = blend(lm, noisy, 1.0)
    assert count == native.length - native.prefix_tokens
    assert_same_kv(kv(noisy), want)


@pytest.mark.parametrize("family", ROTARY)
def test_partial_recompute_of_an_exact_cache_changes_nothing(family):
    # each recomputed token attends to positions <= its own only: an exact cache stays exact
    lm = model(family)
    native, _ = contexts(lm)
    want = kv(native)
    question = tiny_tokenizer()(" Who wrote it?", add_special_tokens=False).input_ids
    _, count = blend(lm, native, 0.3, question_ids=question)
    assert 0 < count < native.length
    assert_same_kv(kv(native), want)


def test_blend_repairs_part_of_the_attention_missing_between_chunks():
    lm = model("llama")
    native, split = contexts(lm)
    assert split.length == native.length
    error = lambda c: sum(float((a[1] - b[1]).pow(2).sum()) for a, b in zip(kv(c), kv(native)))  # noqa: E731
    before = error(split)
    assert before > 0  # the second chunk never saw the first
    question = tiny_tokenizer()(" Who wrote the report?", add_special_tokens=False).input_ids
    blend(lm, split, 0.5, question_ids=question)
    assert error(split) < before


def test_bad_fraction_sliding_window_and_absolute_positions_are_refused():
    lm = model("qwen2")
    native, _ = contexts(lm)
    with pytest.raises(CagError, match="between 0 and 1"):
        blend(lm, native, 1.5)
    with pytest.raises(CagError, match="Unknown blend selection 'best'"):
        blend(lm, native, 0.4, select="best")
    assert blend(lm, native, 0.0)[1] == 0
    gemma = tiny_lm("gemma3")  # sliding window 8
    with pytest.raises(CagError, match="sliding-window layers keep 7 tokens"):
        blend(gemma, contexts(gemma)[0], 0.5)
    gpt2 = tiny_lm("gpt2")
    with pytest.raises(CagError, match="rotary generator"):
        blend(gpt2, assemble(gpt2, [prefill_chunk(gpt2, TEXTS[0])]), 0.5)


@pytest.mark.parametrize("family", ROTARY)
def test_query_selection_reads_the_question_attention_and_leaves_the_cache_as_it_was(family):
    lm = model(family)
    native, _ = contexts(lm)
    want = kv(native)
    question = tiny_tokenizer()(" Who wrote the report?", add_special_tokens=False).input_ids
    scores = query_scores(lm, native, question)
    assert native.cache.get_seq_length() == native.length  # the question's K/V were dropped again
    assert_same_kv(kv(native), want, atol=0)
    # the same sums from one eager forward over prefix + context + question, no cache
    p, n = native.prefix_tokens, native.length
    weights = eager_attention(lm, torch.cat([native.input_ids, torch.tensor(question)]))
    upper = weights[len(weights) // 2:]  # the upper half of the layers, the prompt's last tokens
    expected = sum(w[0, :, -QUERY_TOKENS:, p:n].sum((0, 1)) for w in upper)
    torch.testing.assert_close(scores, expected, atol=1e-4, rtol=1e-4)
    # other token counts and layer ranges: the same sums over those tokens and layers
    every_layer_last1 = query_scores(lm, native, question, last_tokens=1, from_layer=0.0)
    torch.testing.assert_close(every_layer_last1, sum(w[0, :, -1:, p:n].sum((0, 1)) for w in weights),
                               atol=1e-4, rtol=1e-4)
    assert not torch.allclose(every_layer_last1, scores)
    assert lm.model.config._attn_implementation == "sdpa"
    _, count = blend(lm, native, 0.3, select="query", question_ids=question)
    assert count > 0
    assert_same_kv(kv(native), want)  # an exact cache stays exact
    with pytest.raises(CagError, match="needs the question"):
        blend(lm, native, 0.3, select="query")
    _, split = contexts(lm)
    assert blend(lm, split, 0.3, question_ids=question)[1] == count  # ceil(0.3 T) of any context


def test_query_selection_on_a_sliding_window_generator_when_context_and_question_pass_the_window():
    """gemma3's sliding layers drop their oldest K/V once the question pushes past the window: the
    question pass must still leave the whole context cached, and read the same attention sums."""
    probe = tiny_lm("gemma3", sliding_window=512)
    length = contexts(probe)[0].length
    lm = tiny_lm("gemma3", sliding_window=length + 2)  # the context fits, context + question does not
    native, _ = contexts(lm)
    want = kv(native)
    question = tiny_tokenizer()(" Who wrote the report in the end?", add_special_tokens=False).input_ids
    assert native.length + len(question) > length + 2
    scores = query_scores(lm, native, question)
    assert native.cache.get_seq_length() == native.length
    assert_same_kv(kv(native), want, atol=0)
    assert all(getattr(layer, "record_past", False) is False for layer in native.cache.layers)
    # the same sums as one eager forward over prefix + context + question, no cache (sliding masks)
    p, n = native.prefix_tokens, native.length
    weights = eager_attention(lm, torch.cat([native.input_ids, torch.tensor(question)]))
    expected = sum(w[0, :, -QUERY_TOKENS:, p:n].sum((0, 1)) for w in weights[len(weights) // 2:])
    torch.testing.assert_close(scores, expected, atol=1e-4, rtol=1e-4)
    # the generation after it still works: a blend, then the question read over the whole context
    _, count = blend(lm, native, 0.3, select="query", question_ids=question)
    assert count > 0 and native.cache.get_seq_length() == native.length




def noisy_split(lm):
    """Two independently prefilled chunks with noise on their K/V: something for a blend to repair."""
    _, split = contexts(lm)
    torch.manual_seed(2)
    for layer in split.cache.layers:
        layer.keys[:, :, split.prefix_tokens:] += 0.3 * torch.randn_like(layer.keys[:, :, split.prefix_tokens:])
    return split


@pytest.mark.parametrize("family", ROTARY)
def test_a_deferred_blend_recomputed_with_the_question_matches_recomputing_first(family):
    lm = model(family)
    question = tiny_tokenizer()(" Who wrote the report?", add_special_tokens=False).input_ids
    q = torch.tensor(question)
    first, deferred = noisy_split(lm), noisy_split(lm)
    _, count = blend(lm, first, 0.4, question_ids=question)
    assert first.pending is None
    repaired = kv(first)
    with torch.no_grad():
        want = lm.model(input_ids=q[None], position_ids=torch.arange(first.length, first.length + len(q))[None],
                        cache=first.cache, use_cache=True, logits_to_keep=1).logits[0]
    stale = kv(deferred)
    assert blend(lm, deferred, 0.4, question_ids=question, defer=True)[1] == count
    assert deferred.pending.positions.numel() == count
    assert_same_kv(kv(deferred), stale, atol=0)  # nothing recomputed yet
    assert any(not torch.allclose(a[0], b[0], atol=1e-3) for a, b in zip(stale, repaired))  # but there is to do
    got = read_after(lm, deferred, q)
    assert deferred.pending is None and deferred.cache.get_seq_length() == deferred.length + len(q)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert_same_kv(kv(deferred), kv(first))  # context and question K/V alike


def test_greedy_answers_after_a_deferred_blend_are_the_answers_after_an_immediate_one():
    lm = model("qwen2")
    question = tiny_tokenizer()(" Who wrote the report?", add_special_tokens=False).input_ids
    now, later = noisy_split(lm), noisy_split(lm)
    blend(lm, now, 0.5, question_ids=question)
    blend(lm, later, 0.5, question_ids=question, defer=True)
    assert greedy_generate(lm, question, later, 6).token_ids == greedy_generate(lm, question, now, 6).token_ids
    with pytest.raises(CagError, match="already waits"):
        again = noisy_split(lm)
        blend(lm, again, 0.5, question_ids=question, defer=True)
        blend(lm, again, 0.5, question_ids=question, defer=True)


def test_a_deferred_blend_past_the_sliding_window_recomputes_before_the_question():
    # the context fits gemma3's window, context + question do not: the recompute cannot share the
    # question's forward (the window would drop context), so it runs first, with the same result
    probe = tiny_lm("gemma3", sliding_window=512)
    length = contexts(probe)[0].length
    lm = tiny_lm("gemma3", sliding_window=length + 2)
    question = tiny_tokenizer()(" Who wrote the report in the end?", add_special_tokens=False).input_ids
    now, later = noisy_split(lm), noisy_split(lm)
    assert later.length + len(question) > length + 2
    blend(lm, now, 0.4, question_ids=question)
    blend(lm, later, 0.4, question_ids=question, defer=True)
    stale = kv(later)
    assert any(not torch.allclose(a[0], b[0], atol=1e-3) for a, b in zip(stale, kv(now)))
    assert greedy_generate(lm, question, later, 5).token_ids == greedy_generate(lm, question, now, 5).token_ids
    assert later.pending is None
    assert_same_kv(kv(later), kv(now))  # the whole cache, context recomputed alike
