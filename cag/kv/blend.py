"""Selective recompute of an assembled context (CacheBlend-style): the generator recomputes a share
of the context tokens over all its layers, each attending to the stored (translated or
independently prefilled) K/V of the others, and their K/V replace the stored ones.

Which tokens: a `Selection` scores every context token and the top share is recomputed. The one
cag offers, "query", takes the tokens the question attends to most, read off one pass of the
question over the stored context: the attention of its last `QUERY_TOKENS` tokens (the end of the
prompt, just before the answer starts) in the upper half of the layers, summed over heads: where
the answer is, which is where a translated cache's errors cost most; the question's K/V are dropped
again before the recompute. Other selections were measured worse (docs/results.md) and live with
the experiments (`register_selection` adds them).
Cost: one extra prefill of the question, plus the recomputed share of a prefill. Deferred
(`defer=True`, what the blend modes do), the chosen tokens wait in a `PendingRecompute` for the
generator's prefill of the question and both run in one forward (cag.kv.generate.read_after): the
same computation, one pass over the weights fewer.

Rotary generators only; the cache must hold every position (no sliding-window layer may have
dropped tokens). Cache index == position: assembly lays the prefix and chunks out contiguously.
"""

import math

import torch

from cag.defaults import DEFAULT_BLEND_SELECT
from cag.errors import CagError
from cag.kv.assemble import AssembledContext
from cag.models.geometry import require_every_position
from cag.models.layers import attention_modules

QUERY_TOKENS = 4  # selection "query": the attention of the prompt's last tokens (upper half of the layers)


class Selection:
    """Which context tokens a blend recomputes: the `fraction` with the highest `scores`."""

    name = ""

    def scores(self, lm, context: AssembledContext, question_ids) -> torch.Tensor:
        """(T,) one score per context token (prefix excluded)."""
        raise NotImplementedError

    def choose(self, lm, context: AssembledContext, fraction: float, question_ids) -> torch.Tensor:
        """(S,) sorted cache positions (== cache indices) of the tokens to recompute."""
        return select_tokens(self.scores(lm, context, question_ids), fraction) + context.prefix_tokens


class QuerySelection(Selection):
    name = "query"

    def scores(self, lm, context: AssembledContext, question_ids) -> torch.Tensor:
        return query_scores(lm, context, question_ids or ())


SELECTIONS: dict[str, Selection] = {"query": QuerySelection()}


def register_selection(selection: Selection) -> None:
    SELECTIONS[selection.name] = selection


def check_blend_options(fraction: float, select: str) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise CagError(f"--blend must be between 0 and 1 (a share of the context tokens), not {fraction}.")
    if select not in SELECTIONS:
        raise CagError(f"Unknown blend selection {select!r}; choose {' or '.join(SELECTIONS)}.")


def check_blendable(lm, length: int) -> None:
    require_every_position(lm, length, "Blend modes")


@torch.no_grad()
def query_scores(lm, context: AssembledContext, question_ids, last_tokens: int = QUERY_TOKENS,
                 from_layer: float = 0.5) -> torch.Tensor:
    """(T,) per context token: the attention the question's last `last_tokens` tokens pay it with
    the generator reading the question right after the stored context, summed over the layers from
    `from_layer` (a share of the depth: 0.5 = the upper half), heads and those tokens. Attention
    weights need the eager implementation for this one forward; the cache is cropped back to the
    context afterwards."""
    ids = torch.as_tensor(list(question_ids), dtype=torch.int64)
    if ids.numel() == 0:
        raise CagError("Blend selection 'query' needs the question's tokens.")
    p, length, model = context.prefix_tokens, context.length, lm.model
    scores = torch.zeros(length - p, dtype=torch.float32)

    def record(module, args, output):
        weights = output[1]  # (1, H, q, length + q)
        scores.add_(weights[0, :, -last_tokens:, p:length].float().sum((0, 1)).cpu())

    attention = attention_modules(model)
    hooks = [module.register_forward_hook(record) for module in attention[int(len(attention) * from_layer):]]
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


def select_tokens(scores: torch.Tensor, fraction: float) -> torch.Tensor:
    """Indices (sorted) of the ceil(fraction * T) highest-scoring tokens."""
    count = min(scores.numel(), math.ceil(fraction * scores.numel()))
    return scores.topk(count).indices.sort().values


class PendingRecompute:
    """A blend's chosen tokens, waiting in `AssembledContext.pending` for the generator's next read of
    the context: `read_with` recomputes them in the forward that reads the new tokens (one pass over
    the weights), `settle` on their own. Only cag.kv.generate.read_after reads a context that has one."""

    def __init__(self, positions: torch.Tensor):
        self.positions = positions  # (S,) sorted cache positions (== cache indices)

    def read_with(self, lm, context: AssembledContext, new_ids: torch.Tensor) -> torch.Tensor:
        """Recompute and read (T,) `new_ids` after the context in one forward; (1, vocab) logits."""
        context.pending = None
        return recompute_in_place(lm, context, self.positions, new_ids)

    def settle(self, lm, context: AssembledContext) -> None:
        context.pending = None
        recompute_in_place(lm, context, self.positions)


@torch.no_grad()
def blend(lm, context: AssembledContext, fraction: float, select: str = DEFAULT_BLEND_SELECT,
          question_ids=None, defer: bool = False) -> tuple[AssembledContext, int]:
    """Recompute `fraction` of the context tokens in place; (the context, how many tokens).
    `question_ids`: what the generator will read after the context (the query selection's input).
    `defer`: only choose them (`context.pending`, a PendingRecompute); the generator's next read
    after the context (cag.kv.generate.read_after) recomputes them in its forward."""
    check_blend_options(fraction, select)
    check_blendable(lm, context.length)
    if context.pending is not None:
        raise CagError("This context already waits for a blend's recompute.")
    p, total = context.prefix_tokens, context.length
    if fraction == 0.0 or total == p:
        return context, 0
    if fraction == 1.0:  # every token: no selection needed
        chosen = torch.arange(p, total)
    else:
        chosen = SELECTIONS[select].choose(lm, context, fraction, question_ids)
    if chosen.numel():
        context.pending = PendingRecompute(chosen)
        if not defer:
            context.pending.settle(lm, context)
    return context, int(chosen.numel())


def recompute_in_place(lm, context: AssembledContext, chosen: torch.Tensor,
                       new_ids: torch.Tensor | None = None) -> torch.Tensor | None:
    """Run the generator over the tokens at positions `chosen` (sorted); at every layer their new
    K/V overwrite the stored ones before attention, and each attends to positions <= its own.
    With (T,) `new_ids`, the same forward also reads them after the context (appending their K/V,
    each attending to the whole context, recomputed tokens included, and to the new ones before
    it); (1, vocab) logits of the last new token, else None."""
    cache, device = context.cache, lm.device
    index = chosen.to(device)
    count = index.numel()
    new = torch.zeros(0, dtype=torch.int64) if new_ids is None else torch.as_tensor(new_ids, dtype=torch.int64)
    positions = torch.cat([index, torch.arange(context.length, context.length + new.numel(), device=device)])
    dtype = cache.layers[0].keys.dtype
    append = type(cache).update

    def update(key_states, value_states, layer_idx, *args, **kwargs):  # (1, kv_heads, S + T, head_dim)
        stored = cache.layers[layer_idx]
        stored.keys[:, :, index] = key_states[:, :, :count].to(dtype)
        stored.values[:, :, index] = value_states[:, :, :count].to(dtype)
        if key_states.shape[2] == count:
            return stored.keys, stored.values
        return append(cache, key_states[:, :, count:], value_states[:, :, count:], layer_idx, *args, **kwargs)

    # (S + T, L + T) additive mask: the token at position q sees keys at positions <= q
    allowed = torch.arange(context.length + new.numel(), device=device)[None, :] <= positions[:, None]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    ids = torch.cat([context.input_ids[chosen.cpu()], new])
    cache.update = update  # instance attribute: shadows DynamicCache.update for this forward only
    try:
        out = lm.model(input_ids=ids[None].to(device), position_ids=positions[None],
                       attention_mask=mask[None, None], cache=cache, use_cache=True, logits_to_keep=1)
    finally:
        del cache.update
    return out.logits[0] if new.numel() else None
