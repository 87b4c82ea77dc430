"""Selective recompute of an assembled context (CacheBlend-style): the generator recomputes a share
of the context tokens over all its layers, each attending to the stored (translated or
independently prefilled) K/V of the others, and their K/V replace the stored ones.

Which tokens ("query", the default): the tokens the question attends to most, read off one pass
of the question over the stored context: the attention of its last `QUERY_TOKENS` tokens (the end
of the prompt, just before the answer starts) in the upper half of the layers, summed over heads:
where the answer is, which is where a translated cache's errors cost most; the question's K/V are
dropped again before the recompute. (Measured on 73 SQuAD passages translated by a MoT translator:
the selected 15% covers 0.59 of the gold answer's tokens, against 0.28 with every question token and
layer summed, 0.27 for deviation and 0.18 for random; on SQuAD 200 it adds 11.5 F1 over deviation.)
"query-span": the same scores, each token's raised to the best within `SPAN_RADIUS` tokens either
side, so a selected token brings its neighbours along (answers are spans). It covers more of the
gold answer (0.742 against 0.695 at 25% on 150 SQuAD passages outside the evaluated 200,
benchmarks/probe_blend_selection.py) yet answers worse on SQuAD 200 (-4.47 F1 [-8.42, -0.79] at
0.25): the tokens worth repairing are those the question reads, not only the answer's. Kept as a
measured alternative, like deviation and random.
"query-twice": the query selection in two rounds of half the share each: the question is read
again after the first half is recomputed, and the second half goes to the tokens it attends to
most then. The first pass reads the question's attention over translated upper-layer keys, which
is where translation errs most (benchmarks/probe_layer_oracle.py), so part of that attention lands
on the wrong tokens; the second pass reads it over a partly repaired context. Costs one more pass
of the question.
"deviation": those whose stored K/V deviate most from the generator's own at an early layer
(`SELECT_LAYER`); the generator computes its own K/V there by running its first layers over the
whole context (a `(SELECT_LAYER + 1) / layers` share of a prefill), stopped by the cache. "starts":
the first tokens of every chunk, the same number from each (EPIC-style: an independently prefilled
chunk's first tokens were its attention sink and saw none of the chunks before it); no probe.
"random": a uniform sample seeded by the context's token ids (the control).
Cost: the probe's share (deviation), or one extra prefill of the question (query), plus the
recomputed share of a prefill; the question then continues the cache.

Rotary generators only; the cache must hold every position (no sliding-window layer may have
dropped tokens). Cache index == position: assembly lays the prefix and chunks out contiguously.
"""

import hashlib
import math

import torch
from transformers import DynamicCache

from cag.defaults import DEFAULT_BLEND_SELECT
from cag.errors import CagError
from cag.kv.assemble import AssembledContext, native_prefix_kv

SELECT_LAYER = 1  # CacheBlend's choice: layer 0's K/V hold no context, layer 1's already do
SELECTIONS = ("deviation", "starts", "random", "query", "query-span", "query-twice")
QUERY_TOKENS = 4  # selection "query": the attention of the prompt's last tokens (upper half of the layers)
SPAN_RADIUS = 2  # selection "query-span": neighbours either side that share a token's score


class _Stop(Exception):
    """Raised by the probe cache once the selection layer's K/V are captured."""


class _ProbeCache(DynamicCache):
    """Native prefix K/V; captures the context's K/V at `layer` and stops the forward there."""

    def __init__(self, config, prefix_kv, layer: int):
        super().__init__(config=config)
        self.layer = layer
        self.captured = None
        if prefix_kv is not None:
            for i, (k, v) in enumerate(zip(*prefix_kv)):
                DynamicCache.update(self, k[None], v[None], i)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if layer_idx == self.layer:
            self.captured = (key_states[0], value_states[0])  # (H, T, D), rotated
            raise _Stop
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


def check_blend_options(fraction: float, select: str) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise CagError(f"--blend must be between 0 and 1 (a share of the context tokens), not {fraction}.")
    if select not in SELECTIONS:
        raise CagError(f"Unknown blend selection {select!r}; choose {' or '.join(SELECTIONS)}.")


def check_blendable(lm, length: int) -> None:
    geometry = lm.geometry
    if not geometry.is_rotary:
        raise CagError(f"Blend modes need a rotary generator; {geometry.family} uses absolute positions.")
    if geometry.sliding_window and length >= geometry.sliding_window:
        raise CagError(f"Blend modes need every position in the cache: {lm.name}'s sliding-window "
                       f"layers keep {geometry.sliding_window - 1} tokens, the context has {length}.")


@torch.no_grad()
def deviation_scores(lm, context: AssembledContext, layer: int = SELECT_LAYER) -> torch.Tensor:
    """(T,) per context token: normalized squared distance between the stored K/V at `layer` and the
    generator's own, computed by running its first `layer + 1` layers over the context."""
    p = context.prefix_tokens
    ids = context.input_ids[p:]
    prefix_kv = native_prefix_kv(lm, context.input_ids[:p]) if p else None
    probe = _ProbeCache(lm.config, prefix_kv, layer)
    positions = torch.arange(p, context.length, device=lm.device)[None]
    try:
        lm.model(input_ids=ids[None].to(lm.device), position_ids=positions, cache=probe, use_cache=True,
                 logits_to_keep=1)
    except _Stop:
        pass
    own_k, own_v = (x.float() for x in probe.captured)  # (H, T, D)
    stored = context.cache.layers[layer]
    k, v = stored.keys[0, :, p:].float(), stored.values[0, :, p:].float()  # (H, T, D)

    def distance(a, b):  # (T,)
        return (a - b).pow(2).sum((0, 2)) / b.pow(2).sum((0, 2)).mean().clamp_min(1e-12)

    return distance(k, own_k) + distance(v, own_v)


@torch.no_grad()
def query_scores(lm, context: AssembledContext, question_ids, last_tokens: int = QUERY_TOKENS,
                 from_layer: float = 0.5) -> torch.Tensor:
    """(T,) per context token: the attention the question's last `last_tokens` tokens pay it with
    the generator reading the question right after the stored context, summed over the layers from
    `from_layer` (a share of the depth: 0.5 = the upper half), heads and those tokens. Attention
    weights need the eager implementation for this one forward; the cache is cropped back to the
    context afterwards."""
    from mot.diagnostics import decoder_layers
    ids = torch.as_tensor(list(question_ids), dtype=torch.int64)
    if ids.numel() == 0:
        raise CagError("Blend selection 'query' needs the question's tokens.")
    p, length, model = context.prefix_tokens, context.length, lm.model
    scores = torch.zeros(length - p, dtype=torch.float32)

    def record(module, args, output):
        weights = output[1]  # (1, H, q, length + q)
        scores.add_(weights[0, :, -last_tokens:, p:length].float().sum((0, 1)).cpu())

    attention = [getattr(layer, "self_attn", None) or layer.attn for layer in decoder_layers(model)]
    first = int(len(attention) * from_layer)
    hooks = [module.register_forward_hook(record) for module in attention[first:]]
    implementation = model.config._attn_implementation
    model.set_attn_implementation("eager")
    # sliding-window layers drop their oldest K/V once context + question pass the window; recording
    # keeps them until the crop below, so the context comes back whole
    windowed = [layer for layer in context.cache.layers if getattr(layer, "record_past", True) is False]
    for layer in windowed:
        layer.activate_past_recording()
    try:
        positions = torch.arange(length, length + ids.numel(), device=lm.device)[None]
        model(input_ids=ids[None].to(lm.device), position_ids=positions, cache=context.cache, use_cache=True,
              logits_to_keep=1)
    finally:
        model.set_attn_implementation(implementation)
        for hook in hooks:
            hook.remove()
        added = context.cache.get_seq_length() - length
        if added > 0:
            context.cache.crop(-added)
        for layer in windowed:
            layer.record_past = False
    return scores


def widen_to_spans(scores: torch.Tensor, radius: int = SPAN_RADIUS) -> torch.Tensor:
    """(T,) each token's score raised to the highest within `radius` tokens either side; a peak
    keeps a hair more than its plateau, so with a budget smaller than the plateau the peak stays."""
    pooled = torch.nn.functional.max_pool1d(scores[None, None].float(), kernel_size=2 * radius + 1,
                                            stride=1, padding=radius)[0, 0]  # (T,)
    return pooled + 1e-6 * scores


def select_tokens(scores: torch.Tensor, fraction: float) -> torch.Tensor:
    """Indices (sorted) of the ceil(fraction * T) highest-scoring tokens."""
    count = min(scores.numel(), math.ceil(fraction * scores.numel()))
    return scores.topk(count).indices.sort().values


def random_scores(context: AssembledContext) -> torch.Tensor:
    """(T,) uniform scores, the same for the same context (seeded by sha256 of its token ids)."""
    ids = context.input_ids.to(torch.int64).cpu().numpy().tobytes()
    seed = int.from_bytes(hashlib.sha256(ids).digest()[:8], "little")
    return torch.rand(context.length - context.prefix_tokens, generator=torch.Generator().manual_seed(seed))


def start_scores(context: AssembledContext) -> torch.Tensor:
    """(T,) per context token, highest first: every chunk's first token (in chunk order), then every
    chunk's second token, and so on; so the top share takes about as many tokens from each chunk."""
    p = context.prefix_tokens
    spans = context.chunk_spans or [(p, context.length)]
    scores = torch.full((context.length - p,), float("-inf"))
    for order, (start, end) in enumerate(spans):
        within = torch.arange(end - start, dtype=torch.float64)
        scores[start - p:end - p] = (-(within * len(spans) + order)).float()
    return scores


@torch.no_grad()
def blend(lm, context: AssembledContext, fraction: float, select: str = DEFAULT_BLEND_SELECT,
          layer: int = SELECT_LAYER, question_ids=None) -> tuple[AssembledContext, int]:
    """Recompute `fraction` of the context tokens in place; (the context, tokens recomputed).
    `question_ids`: what the generator will read after the context (selection "query")."""
    check_blend_options(fraction, select)
    check_blendable(lm, context.length)
    p, total = context.prefix_tokens, context.length
    if fraction == 0.0 or total == p:
        return context, 0
    if select == "query-twice" and fraction < 1.0:
        return context, query_twice(lm, context, fraction, question_ids or ())
    if fraction == 1.0:
        scores = torch.zeros(total - p)
    else:
        scores = {"deviation": lambda: deviation_scores(lm, context, layer),
                  "starts": lambda: start_scores(context), "random": lambda: random_scores(context),
                  "query": lambda: query_scores(lm, context, question_ids or ()),
                  "query-span": lambda: widen_to_spans(query_scores(lm, context, question_ids or ()))}[select]()
    chosen = select_tokens(scores, fraction) + p  # (S,) cache indices == positions
    recompute_in_place(lm, context, chosen)
    return context, int(chosen.numel())


@torch.no_grad()
def query_twice(lm, context: AssembledContext, fraction: float, question_ids) -> int:
    """Selection "query-twice": recompute the first half of the share by query scores, score the
    question again over the partly repaired context, recompute the rest; tokens recomputed."""
    p = context.prefix_tokens
    budget = min(context.length - p, math.ceil(fraction * (context.length - p)))
    first = query_scores(lm, context, question_ids).topk(math.ceil(budget / 2)).indices  # (S1,)
    recompute_in_place(lm, context, first.sort().values + p)
    scores = query_scores(lm, context, question_ids)
    scores[first] = float("-inf")  # each token is recomputed once
    second = scores.topk(budget - first.numel()).indices  # (S2,)
    if second.numel():
        recompute_in_place(lm, context, second.sort().values + p)
    return budget


def recompute_in_place(lm, context: AssembledContext, chosen: torch.Tensor) -> None:
    """Run the generator over the tokens at positions `chosen` (sorted); at every layer their new
    K/V overwrite the stored ones before attention, and each attends to positions <= its own."""
    cache, device = context.cache, lm.device
    index = chosen.to(device)
    dtype = cache.layers[0].keys.dtype

    def update(key_states, value_states, layer_idx, *args, **kwargs):  # replaces, never appends
        stored = cache.layers[layer_idx]
        stored.keys[:, :, index] = key_states.to(dtype)
        stored.values[:, :, index] = value_states.to(dtype)
        return stored.keys, stored.values

    # (1, 1, S, L) additive mask: query at position q sees keys at positions <= q
    allowed = torch.arange(context.length, device=device)[None, :] <= index[:, None]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    cache.update = update  # instance attribute: shadows DynamicCache.update for this forward only
    try:
        lm.model(input_ids=context.input_ids[chosen][None].to(device), position_ids=index[None],
                 attention_mask=mask[None, None], cache=cache, use_cache=True, logits_to_keep=1)
    finally:
        del cache.update
