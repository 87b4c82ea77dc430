"""Blend selections measured worse than cag's "query" (docs/results.md), kept for the experiments
that compare them. `register()` adds them to cag.kv.blend's selections, so that `blend(...,
select=NAME)` and eval runs with `blend_select=NAME` (experiments/eval_with_selection.py) use them.

"query-span": the query scores, each token's raised to the best within `SPAN_RADIUS` tokens either
side, so a selected token brings its neighbours along (answers are spans). It covers more of the
gold answer (0.742 against 0.695 at 25% on 150 SQuAD passages outside the evaluated 200,
experiments/probe_blend_selection.py) yet answers worse on SQuAD 200 (-4.47 F1 [-8.42, -0.79] at 0.25).
"query-twice": the query selection in two rounds of half the share each: the question is read
again after the first half is recomputed (-0.18 F1 [-2.26, +1.82] at 0.25 on SQuAD 200: nothing
gained for the extra question pass).
"deviation": the tokens whose stored K/V deviate most from the generator's own at an early layer
(`SELECT_LAYER`); the generator computes its own K/V there by running its first layers over the
whole context, stopped by the cache (query adds 11.5 F1 over it on SQuAD 200).
"starts": the first tokens of every chunk, the same number from each (EPIC-style); no probe.
"random": a uniform sample seeded by the context's token ids (the control).
"""

import hashlib
import math

import torch
from transformers import DynamicCache

from cag.kv.assemble import AssembledContext, native_prefix_kv
from cag.kv.blend import Selection, query_scores, recompute_in_place, register_selection

SELECT_LAYER = 1  # CacheBlend's choice: layer 0's K/V hold no context, layer 1's already do
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


def widen_to_spans(scores: torch.Tensor, radius: int = SPAN_RADIUS) -> torch.Tensor:
    """(T,) each token's score raised to the highest within `radius` tokens either side; a peak
    keeps a hair more than its plateau, so with a budget smaller than the plateau the peak stays."""
    pooled = torch.nn.functional.max_pool1d(scores[None, None].float(), kernel_size=2 * radius + 1,
                                            stride=1, padding=radius)[0, 0]  # (T,)
    return pooled + 1e-6 * scores


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


class DeviationSelection(Selection):
    name = "deviation"

    def scores(self, lm, context, question_ids):
        return deviation_scores(lm, context)


class StartsSelection(Selection):
    name = "starts"

    def scores(self, lm, context, question_ids):
        return start_scores(context)


class RandomSelection(Selection):
    name = "random"

    def scores(self, lm, context, question_ids):
        return random_scores(context)


class QuerySpanSelection(Selection):
    name = "query-span"

    def scores(self, lm, context, question_ids):
        return widen_to_spans(query_scores(lm, context, question_ids or ()))


class QueryTwiceSelection(Selection):
    """Recompute the first half of the share by query scores (here, at once), score the question
    again over the partly repaired context, and choose the rest (what blend then reports)."""

    name = "query-twice"

    @torch.no_grad()
    def choose(self, lm, context, fraction, question_ids) -> torch.Tensor:
        p = context.prefix_tokens
        budget = min(context.length - p, math.ceil(fraction * (context.length - p)))
        first = query_scores(lm, context, question_ids or ()).topk(math.ceil(budget / 2)).indices  # (S1,)
        recompute_in_place(lm, context, first.sort().values + p)
        scores = query_scores(lm, context, question_ids or ())
        scores[first] = float("-inf")  # each token is recomputed once
        second = scores.topk(budget - first.numel()).indices  # (S2,)
        return second.sort().values + p


def register() -> None:
    for selection in (DeviationSelection(), StartsSelection(), RandomSelection(), QuerySpanSelection(),
                      QueryTwiceSelection()):
        register_selection(selection)
