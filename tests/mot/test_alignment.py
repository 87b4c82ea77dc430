"""Token alignment by character overlap: whitespace conventions, specials, no-overlap tokens."""

import torch

from mot.alignment import align, trimmed_spans
from mot.layer_map import pair_layers


def spans(*pairs):
    return torch.tensor(pairs, dtype=torch.int64)


def test_rows_sum_to_one_and_split_by_overlap():
    text = "hello world"
    # target: "hello" " world"; source: "hel" "lo" " wor" "ld"
    a = align(text, spans((0, 5), (5, 11)), spans((0, 3), (3, 5), (5, 9), (9, 11)))
    assert torch.allclose(a.weights.sum(1), torch.ones(2))
    assert torch.allclose(a.weights[0], torch.tensor([0.6, 0.4, 0.0, 0.0]))
    # " world" trimmed to "world": " wor" covers "wor" (3 chars), "ld" 2
    assert torch.allclose(a.weights[1], torch.tensor([0.0, 0.0, 0.6, 0.4]))
    assert a.nearest == 0


def test_byte_level_and_sentencepiece_whitespace_align_the_same():
    text = "a cat sat"
    byte_level = spans((0, 1), (1, 5), (5, 9))  # "a", " cat", " sat" (space inside the token)
    sentencepiece = spans((0, 1), (2, 5), (6, 9))  # "a", "cat", "sat" (space outside)
    a = align(text, byte_level, sentencepiece)
    assert torch.equal(a.weights, torch.eye(3))
    assert trimmed_spans(text, byte_level).tolist() == [[0, 1], [2, 5], [6, 9]]


def test_one_tokenization_on_both_sides_is_the_identity():
    text = "東京"  # byte-level tokens split 東 in two: both share its span
    tokens = spans((0, 1), (0, 1), (1, 2))
    assert align(text, tokens, tokens).weights.equal(torch.eye(3))
    # another tokenization of the same span is still split by overlap
    merged = align(text, spans((0, 1), (1, 2)), tokens)
    assert torch.allclose(merged.weights, torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))


def test_special_and_non_overlapping_tokens_take_the_nearest_and_are_counted():
    text = "ab  cd"
    target = spans((0, 0), (0, 2), (2, 4), (4, 6))  # a special (empty), "ab", "  " (space only), "cd"
    source = spans((0, 1), (1, 2), (4, 6))
    a = align(text, target, source)
    assert torch.allclose(a.weights.sum(1), torch.ones(4))
    assert a.empty_target == 1
    assert a.nearest == 2  # the special and the all-space token
    assert a.weights[0, 0] == 1.0  # nearest to position 0
    assert torch.allclose(a.weights[3], torch.tensor([0.0, 0.0, 1.0]))


def test_layer_pairing_by_relative_depth():
    pairs = pair_layers(30, 24, width=2)
    assert len(pairs) == 24 and all(len(p) == 2 for p in pairs)
    assert pairs[0] == [0, 1] and pairs[-1] == [28, 29]
    depths = [sum(p) / 2 for p in pairs]
    assert depths == sorted(depths)  # deeper target layers read deeper source layers
    assert pair_layers(4, 8, width=1)[0] == [0] and pair_layers(4, 8, width=1)[-1] == [3]
    assert pair_layers(2, 3, width=5) == [[0, 1]] * 3  # width capped at the source's layers
