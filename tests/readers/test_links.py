"""Link tokens (cag/readers/links.py): learned tokens after every stored chunk, computed by the
unchanged generator at ask time; the chunks' own K/V are only re-placed."""

import torch

from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunks
from cag.kv.rotary import Rotary
from cag.prompt import prompt_layout
from cag.readers.links import initial_links, layout, with_links
from cag.testing import tiny_lm

TEXTS = ["The European lobster may grow to a length of 60 cm.", "Mount Elbert is 14,440 feet high.",
         "Hurricane Beatriz formed in June 2011."]


def contexts(lm, texts):
    prefix = prompt_layout(lm.tokenizer).prefix_ids
    return assemble(lm, prefill_chunks(lm, texts, prefix), prefix)


def test_layout_leaves_room_after_every_chunk():
    where = layout(3, [2, 4], 2)
    assert where.chunk_positions.tolist() == [3, 4, 7, 8, 9, 10]
    assert where.link_positions.tolist() == [5, 6, 11, 12] and where.spans == [(3, 5), (7, 11)] and where.length == 13


def test_links_keep_the_chunks_and_see_only_what_precedes_them():
    lm = tiny_lm("qwen2", seed=3)
    links = initial_links(lm, 2) + 0.1 * torch.randn(2, lm.config.hidden_size, generator=torch.Generator().manual_seed(0))
    plain = contexts(lm, TEXTS)
    linked = with_links(lm, plain, links)
    assert linked.length == plain.length + 2 * len(TEXTS) and linked.prefix_tokens == plain.prefix_tokens
    rotary = Rotary(lm.model, lm.geometry)
    for layer in range(lm.geometry.num_layers):
        old, new = plain.cache.layers[layer], linked.cache.layers[layer]
        for (a, b), (c, d) in zip(plain.chunk_spans, linked.chunk_spans):
            stored = rotary.remove(old.keys[0, :, a:b], torch.arange(a, b), layer)
            moved = rotary.remove(new.keys[0, :, c:d], torch.arange(c, d), layer)
            assert torch.allclose(stored, moved, atol=1e-5)  # the same chunk K/V, re-placed
            assert torch.equal(old.values[0, :, a:b], new.values[0, :, c:d])
    assert torch.equal(linked.input_ids[linked.chunk_spans[1][0]:linked.chunk_spans[1][1]],
                       plain.input_ids[plain.chunk_spans[1][0]:plain.chunk_spans[1][1]])
    # the links after chunk 1 are computed from the prefix and chunk 1 alone: another chunk 3 changes
    # only what comes after chunk 2
    other = with_links(lm, contexts(lm, TEXTS[:2] + ["Upsilon Andromedae b was found in 1996."]), links)
    first_links = slice(linked.chunk_spans[0][1], linked.chunk_spans[1][0])
    for layer in range(lm.geometry.num_layers):
        a, b = linked.cache.layers[layer], other.cache.layers[layer]
        assert torch.allclose(a.keys[0, :, first_links], b.keys[0, :, first_links], atol=1e-5)
    top = lm.geometry.num_layers - 1  # (layer 0's K/V of a link are its embedding's alone)
    last, other_last = linked.cache.layers[top].values[0, :, -2:], other.cache.layers[top].values[0, :, -2:]
    assert not torch.allclose(last, other_last, atol=1e-4)
