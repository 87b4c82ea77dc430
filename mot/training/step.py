"""One translator forward over a prepared window: translated context, continuation, losses."""

from dataclasses import dataclass

import torch

from mot.alignment import align
from mot.injection import full_cache, prefix_cache, window_cache
from mot.training.losses import layers_nmse, top1_agreement, topk_kl
from mot.token_features import embedding_table, token_features


@dataclass
class StepResult:
    reconstruction: torch.Tensor
    kl: torch.Tensor
    continuation_kv: torch.Tensor
    balance: torch.Tensor
    top1: torch.Tensor
    misaligned: int


def chunk_weights(chunk) -> tuple[torch.Tensor, int]:
    """Alignment (T_t, T_s) of a prepared chunk, computed once and kept on it."""
    if getattr(chunk, "_alignment", None) is None:
        chunk._alignment = align(chunk.text, chunk.tgt_offsets, chunk.src_offsets)
    return chunk._alignment.weights, chunk._alignment.nearest


def chunk_tokens(translator, lm, chunk) -> torch.Tensor | None:
    """The target token features (T_t, count * H) of a prepared chunk when the translator reads
    them (mot/token_features.py), computed once per count and kept on it; else None."""
    count = translator.spec.target_embeddings
    if not count:
        return None
    cached = getattr(chunk, "_tokens", None)
    if cached is None or cached[0] != count:
        chunk._tokens = (count, token_features(embedding_table(lm), chunk.tgt_ids, count))
    return chunk._tokens[1]


def translate_window(translator, window, prefix_len: int, lm=None):
    """Translated K/V (H, T_ctx, D) per target layer for the window's chunks laid out after the
    prefix (`lm`, the target, is needed by translators that read its token embeddings)."""
    keys, values, rec, balance, misaligned = [], [], 0.0, 0.0, 0
    pos = prefix_len
    for chunk in window.chunks:
        weights, nearest = chunk_weights(chunk)
        misaligned += nearest
        positions = torch.arange(pos, pos + chunk.tgt_ids.numel())
        k, v, b = translator(chunk.src_keys, chunk.src_values, weights, positions,
                             chunk_tokens(translator, lm, chunk))
        rec = rec + 0.5 * (layers_nmse(k, chunk.tgt_keys) + layers_nmse(v, chunk.tgt_values))
        balance = balance + b
        keys.append(k)
        values.append(v)
        pos += chunk.tgt_ids.numel()
    n = len(window.chunks)
    keys = [torch.cat([k[l] for k in keys], dim=1) for l in range(len(keys[0]))]
    values = [torch.cat([v[l] for v in values], dim=1) for l in range(len(values[0]))]
    return keys, values, rec / n, balance / n, misaligned


def run_window(translator, lm, prefix_kv, prefix_len: int, window, mode: str = "full",
               layers_window: tuple | None = None, with_context: bool = True,
               given: tuple | None = None) -> StepResult:
    """Losses for one window. mode "full" / "window" translated; with_context=False: no context
    at all (the floor, for diagnostics); `given` (keys, values): use these context K/V instead of
    translating (e.g. the generator's own independently prefilled chunks, a reference)."""
    cont = window.cont_ids
    device = lm.device
    zero = torch.zeros(())
    if not with_context:
        cache = prefix_cache(lm, prefix_kv)
        out = lm.model(input_ids=cont[None].to(device),
                       position_ids=torch.arange(prefix_len, prefix_len + cont.numel())[None].to(device),
                       cache=cache, use_cache=True, logits_to_keep=0)
        logits = out.logits[0]
        return StepResult(zero, topk_kl(logits, window.teacher_logp, window.teacher_idx), zero, zero,
                          top1_agreement(logits, window.teacher_idx), 0)
    if given is not None:
        keys, values = given
        rec = balance = zero
        misaligned = 0
    else:
        keys, values, rec, balance, misaligned = translate_window(translator, window, prefix_len, lm)
    ctx = keys[0].shape[1]
    start = prefix_len + ctx
    if mode == "full":
        cache = full_cache(lm, prefix_kv, keys, values, prefix_len)
        ids, first = cont, start
    else:
        cache = window_cache(lm, prefix_kv, keys, values, prefix_len, layers_window)
        ids = torch.cat([torch.cat([c.tgt_ids for c in window.chunks]), cont])
        first = prefix_len
    out = lm.model(input_ids=ids[None].to(device),
                   position_ids=torch.arange(first, first + ids.numel())[None].to(device),
                   cache=cache, use_cache=True, logits_to_keep=cont.numel())
    logits = out.logits[0]  # (Tc, V)
    tc = cont.numel()
    # the continuation's own K/V; a sliding-window layer may hold fewer than tc of them
    kept = [min(tc, layer.keys.shape[2]) for layer in cache.layers]
    cont_k = [layer.keys[0, :, -m:] for layer, m in zip(cache.layers, kept)]
    cont_v = [layer.values[0, :, -m:] for layer, m in zip(cache.layers, kept)]
    cont_kv = 0.5 * (layers_nmse(cont_k, [k[:, -m:] for k, m in zip(window.cont_keys, kept)])
                     + layers_nmse(cont_v, [v[:, -m:] for v, m in zip(window.cont_values, kept)]))
    return StepResult(rec, topk_kl(logits, window.teacher_logp, window.teacher_idx), cont_kv, balance,
                      top1_agreement(logits, window.teacher_idx), misaligned)
