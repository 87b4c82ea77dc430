"""The blend selections measured worse than query (experiments/blend_selections.py) on tiny
rotary models."""

import pytest
import torch

import blend_selections
from blend_selections import SELECT_LAYER, deviation_scores, random_scores, start_scores, widen_to_spans
from cag.kv.blend import blend, query_scores, recompute_in_place, select_tokens
from tests.tiny_models import tiny_tokenizer
from test_blend import TEXTS, assert_same_kv, contexts, kv, model

blend_selections.register()

def test_selection_finds_the_damaged_tokens_and_repairs_them():
    lm = model("qwen2")
    native, _ = contexts(lm)
    want = kv(native)
    damaged, _ = contexts(lm)
    p, hit = damaged.prefix_tokens, [3, 11]
    for layer in damaged.cache.layers:
        for t in hit:
            layer.values[:, :, p + t] += 5.0
    scores = deviation_scores(lm, damaged)
    assert set(scores.topk(2).indices.tolist()) == set(hit)
    fraction = 2 / (damaged.length - p)
    _, count = blend(lm, damaged, fraction, select="deviation")
    assert count == 2
    assert_same_kv(kv(damaged), want)


def test_deviation_sees_nothing_wrong_in_the_first_chunk_of_a_split_context():
    """The first chunk was prefilled after the same prefix as the whole text: its K/V are exact."""
    lm = model("llama")
    _, split = contexts(lm)
    scores = deviation_scores(lm, split, SELECT_LAYER)
    first = len(tiny_tokenizer()(TEXTS[0], add_special_tokens=False).input_ids)
    assert float(scores[:first].abs().max()) < 1e-6 and float(scores[first:].max()) > 0


def test_random_selection_is_a_seeded_control():
    lm = model("qwen2")
    native, split = contexts(lm)
    assert torch.equal(random_scores(split), random_scores(contexts(lm)[1]))  # same context, same draw
    want = kv(native)
    _, count = blend(lm, native, 0.4, select="random")
    assert count == -(-4 * (native.length - native.prefix_tokens) // 10)  # ceil(0.4 T)
    assert_same_kv(kv(native), want)


def test_starts_selection_takes_the_first_tokens_of_every_chunk():
    lm = model("llama")
    native, split = contexts(lm)
    (a_start, a_end), (b_start, b_end) = split.chunk_spans
    p = split.prefix_tokens
    chosen = (select_tokens(start_scores(split), 6 / (split.length - p)) + p).tolist()
    assert chosen == [a_start, a_start + 1, a_start + 2, b_start, b_start + 1, b_start + 2]
    # an odd share: the extra token is the next one of the first chunk
    chosen = (select_tokens(start_scores(split), 3 / (split.length - p)) + p).tolist()
    assert chosen == [a_start, a_start + 1, b_start]
    before = sum(float((a[1] - b[1]).pow(2).sum()) for a, b in zip(kv(split), kv(native)))
    _, count = blend(lm, split, 0.25, select="starts")
    after = sum(float((a[1] - b[1]).pow(2).sum()) for a, b in zip(kv(split), kv(native)))
    assert count == -(-(split.length - p) // 4) and after < before


def test_span_widening_lifts_the_neighbours_of_a_peak_and_keeps_the_peak_first():
    scores = torch.tensor([0.0, 0.1, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.2, 0.0])
    widened = widen_to_spans(scores, radius=2)
    assert widened[2:7].min() >= 5.0 and widened[0] < 1.0 and widened[9] < 1.0
    assert select_tokens(widened, 0.1).tolist() == [4]  # a budget of one: the peak itself
    assert select_tokens(widened, 0.5).tolist() == [2, 3, 4, 5, 6]  # its span
    assert select_tokens(scores, 0.5).tolist() != [2, 3, 4, 5, 6]


def test_query_twice_reads_the_question_again_after_recomputing_half():
    lm = model("qwen2")
    question = tiny_tokenizer()(" Who wrote the report?", add_special_tokens=False).input_ids
    native, _ = contexts(lm)
    want = kv(native)
    _, count = blend(lm, native, 0.5, select="query-twice", question_ids=question)
    budget = -(-(native.length - native.prefix_tokens) // 2)  # ceil(0.5 T), as every selection
    assert count == budget - -(-budget // 2)  # the second round's; the first is recomputed at once
    assert native.cache.get_seq_length() == native.length
    assert_same_kv(kv(native), want)  # an exact cache stays exact

    def noisy():
        _, split = contexts(lm)
        torch.manual_seed(1)
        for layer in split.cache.layers[1:]:
            layer.keys[:, :, split.prefix_tokens:] += 0.5 * torch.randn_like(layer.keys[:, :, split.prefix_tokens:])
        return split

    twice, by_hand, once = noisy(), noisy(), noisy()
    blend(lm, twice, 0.5, select="query-twice", question_ids=question)
    # by hand: half the share by the question's attention, then the question read again over the
    # partly repaired cache and the rest to the tokens it attends to most, none of them twice
    p = by_hand.prefix_tokens
    with torch.no_grad():
        first = query_scores(lm, by_hand, question).topk(-(-budget // 2)).indices
        recompute_in_place(lm, by_hand, first.sort().values + p)
        again = query_scores(lm, by_hand, question)
        again[first] = float("-inf")
        second = again.topk(budget - first.numel()).indices
        assert not set(first.tolist()) & set(second.tolist())
        recompute_in_place(lm, by_hand, second.sort().values + p)
    assert_same_kv(kv(twice), kv(by_hand), atol=1e-6)
    blend(lm, once, 0.5, select="query", question_ids=question)
    error = lambda c: sum(float((a[0] - b[0]).pow(2).sum()) for a, b in zip(kv(c), want))  # noqa: E731
    assert error(twice) < error(noisy())  # it repairs, as the one-round selection does
    assert error(once) < error(noisy())
