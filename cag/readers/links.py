"""Link tokens (KVLink / KV Packet style): `m` learned input embeddings placed after every stored
chunk and computed by the generator at ask time, each attending to the prefix, the chunks up to
its own and the links before it, so that they can carry what the independently prefilled chunks
never saw of each other. The stored chunk caches are not changed (they are re-placed at the
positions the links leave between them); the generator's weights are not changed either.

    [prefix][chunk 1][links][chunk 2][links] ... [chunk n][links][question][answer]

Cost at ask time: one forward over n x m tokens (attending to the whole context).
"""

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from cag.kv.assemble import AssembledContext
from cag.kv.geometry import require_every_position
from cag.kv.rotary import Rotary


@dataclass
class Layout:
    chunk_positions: torch.Tensor  # (T,) where the chunks' tokens sit
    link_positions: torch.Tensor  # (n * m,) where the link tokens sit
    spans: list  # (start, end) of each chunk
    length: int  # prefix + chunks + links


def layout(prefix_tokens: int, lengths: list, links: int) -> Layout:
    chunk, link, spans, pos = [], [], [], prefix_tokens
    for n in lengths:
        chunk.append(torch.arange(pos, pos + n))
        spans.append((pos, pos + n))
        link.append(torch.arange(pos + n, pos + n + links))
        pos += n + links
    return Layout(torch.cat(chunk), torch.cat(link), spans, pos)


def check_linkable(lm, length: int) -> None:
    require_every_position(lm, length, "Link tokens")


def linked_cache(lm, prefix_kv, keys: list, values: list, lengths: list, links: torch.Tensor):
    """(DynamicCache, Layout): the prefix K/V (per layer (H, P, D), or None), the chunks' position-free
    keys and values (per layer (H, T, D), chunks concatenated, `lengths` each) placed with room for
    `links` (m, hidden) after every chunk, and the links computed by the generator. Differentiable
    in `links` (training) when grad is enabled."""
    device = lm.device
    dtype = next(lm.model.parameters()).dtype
    p = prefix_kv[0][0].shape[1] if prefix_kv is not None else 0
    where = layout(p, lengths, links.shape[0])
    check_linkable(lm, where.length)
    rotary = Rotary(lm.model, lm.geometry)
    chunk_pos, link_pos = where.chunk_positions.to(device), where.link_positions.to(device)
    cache = DynamicCache(config=lm.config)
    for layer, (k, v) in enumerate(zip(keys, values)):
        heads, _, dim = k.shape
        full_k = torch.zeros((1, heads, where.length, dim), dtype=dtype, device=device)
        full_v = torch.zeros_like(full_k)
        if p:
            full_k[0, :, :p] = prefix_kv[0][layer].to(device, dtype)
            full_v[0, :, :p] = prefix_kv[1][layer].to(device, dtype)
        full_k[0, :, chunk_pos] = rotary.apply(k.to(device, dtype), chunk_pos, layer)
        full_v[0, :, chunk_pos] = v.to(device, dtype)
        cache.update(full_k, full_v, layer)
    embeds = links.to(device).repeat(len(lengths), 1).to(dtype)  # (n * m, hidden)
    _fill(lm, cache, link_pos, embeds, where.length)
    return cache, where


def _fill(lm, cache, positions: torch.Tensor, embeds: torch.Tensor, length: int) -> None:
    """Run the generator over `embeds` at `positions`; at every layer their K/V are written into
    those (empty) slots before attention, and each sees the positions up to its own."""
    dtype = cache.layers[0].keys.dtype

    def update(key_states, value_states, layer_idx, *args, **kwargs):  # writes, never appends
        stored = cache.layers[layer_idx]
        stored.keys = stored.keys.index_copy(2, positions, key_states.to(dtype))
        stored.values = stored.values.index_copy(2, positions, value_states.to(dtype))
        return stored.keys, stored.values

    allowed = torch.arange(length, device=positions.device)[None, :] <= positions[:, None]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=positions.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    cache.update = update  # instance attribute: shadows DynamicCache.update for this forward only
    try:
        lm.model.get_decoder()(inputs_embeds=embeds[None], position_ids=positions[None],
                               attention_mask=mask[None, None], cache=cache, use_cache=True)
    finally:
        del cache.update


@torch.no_grad()
def with_links(lm, context: AssembledContext, links: torch.Tensor) -> AssembledContext:
    """`context` (an assembled prefix + chunks) with link tokens after every chunk, computed now."""
    p, length, cache = context.prefix_tokens, context.length, context.cache
    lengths = [end - start for start, end in context.chunk_spans]
    if not lengths:
        return context
    check_linkable(lm, length + len(lengths) * links.shape[0])
    rotary = Rotary(lm.model, lm.geometry)
    positions = torch.arange(p, length, device=lm.device)
    prefix = ([layer.keys[0, :, :p] for layer in cache.layers], [layer.values[0, :, :p] for layer in cache.layers])
    keys = [rotary.remove(layer.keys[0, :, p:length], positions, i) for i, layer in enumerate(cache.layers)]
    values = [layer.values[0, :, p:length] for layer in cache.layers]
    linked, where = linked_cache(lm, prefix if p else None, keys, values, lengths, links)
    ids = torch.full((where.length,), lm.tokenizer.pad_token_id or 0, dtype=torch.int64)  # links have no ids
    ids[:p] = context.input_ids[:p]
    ids[where.chunk_positions] = context.input_ids[p:length]
    return AssembledContext(linked, ids, p, where.spans)


def initial_links(lm, count: int, text: str = "\n\n") -> torch.Tensor:
    """(count, hidden) starting embeddings: the generator's own embedding of `text`'s first token
    (as the model scales its inputs), repeated."""
    token = lm.tokenizer(text, add_special_tokens=False)["input_ids"][:1] or [0]
    with torch.no_grad():
        row = lm.model.get_input_embeddings()(torch.tensor([token], device=lm.device))[0, 0].float()
    return row.repeat(count, 1).clone()
