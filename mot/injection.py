"""Putting translated K/V into a generator's cache, differentiably (for training) and for answers.

full:   every target layer gets translated K/V for the context; the generator never runs over it.
window: target layers [start, end) get translated K/V; the generator runs over the context and
        computes the other layers itself (from hidden states shaped by the injected layers): the
        paper's replay. Done with a cache whose update() swaps in the translated K/V for the
        context tokens at the window's layers, so the model's own forward pass is used unchanged.
Both keep the generator's own prefix (BOS / chat-template start) as a native attention sink.
"""

import torch
from transformers import DynamicCache

from cag.errors import CagError
from cag.kv.rotary import Rotary


def default_window(target_layers: int) -> list:
    """[start, end) of the middle third of the target's layers."""
    third = max(1, target_layers // 3)
    return [third, min(target_layers, 2 * third)]


def injection_window(translator, lm, window=None) -> tuple:
    """[start, end) target layers for window injection: given, else the translator's training
    window, else the middle third."""
    layers = lm.geometry.num_layers
    start, end = window or translator.record.training.get("window") or default_window(layers)
    if not 0 <= start < end <= layers:
        raise CagError(f"Injection window {start}:{end} is not inside the generator's {layers} layers.")
    return start, end


def rotate_to(lm, keys: list, start: int) -> list:
    """Position-free keys (H, T, D) per layer rotated to positions start..start+T (rotary models)."""
    if not lm.geometry.is_rotary:
        return keys
    rotary = Rotary(lm.model, lm.geometry)
    positions = torch.arange(start, start + keys[0].shape[1], device=keys[0].device)
    return [rotary.apply(k, positions, layer) for layer, k in enumerate(keys)]


def prefix_cache(lm, prefix_kv) -> DynamicCache:
    """A cache holding the native prefix K/V (per layer (H, P, D) lists), sized like assembly's."""
    cache = DynamicCache(config=lm.config)
    if prefix_kv is not None:
        for layer, (k, v) in enumerate(zip(*prefix_kv)):
            cache.update(k[None], v[None], layer)
    return cache


def full_cache(lm, prefix_kv, keys: list, values: list, start: int) -> DynamicCache:
    """Prefix + translated context in every layer; keys/values (H, T, D) position-free per layer."""
    cache = DynamicCache(config=lm.config)
    rotated = rotate_to(lm, keys, start)
    for layer in range(lm.geometry.num_layers):
        k, v = rotated[layer][None], values[layer][None]
        if prefix_kv is not None:
            k = torch.cat([prefix_kv[0][layer][None].to(k.dtype), k], dim=2)
            v = torch.cat([prefix_kv[1][layer][None].to(v.dtype), v], dim=2)
        cache.update(k, v, layer)
    return cache


class InjectingCache(DynamicCache):
    """A DynamicCache that, on the first update of each injected layer, replaces the first
    `context_tokens` new K/V with the translated ones (already rotated to their positions)."""

    def __init__(self, config, injected: dict, context_tokens: int):
        super().__init__(config=config)
        self.injected = dict(injected)  # layer -> (k (H, T, D), v (H, T, D))
        self.context_tokens = context_tokens

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if layer_idx in self.injected:
            k, v = self.injected.pop(layer_idx)
            n = self.context_tokens
            key_states = torch.cat([k[None].to(key_states.dtype), key_states[:, :, n:]], dim=2)
            value_states = torch.cat([v[None].to(value_states.dtype), value_states[:, :, n:]], dim=2)
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


def window_cache(lm, prefix_kv, keys: list, values: list, start: int, window: tuple) -> InjectingCache:
    """A cache with the native prefix whose next forward (over the context ids, then anything after)
    gets translated K/V at layers window[0]..window[1]-1."""
    rotated = rotate_to(lm, keys, start)
    injected = {layer: (rotated[layer], values[layer]) for layer in range(*window)}
    cache = InjectingCache(lm.config, injected, keys[0].shape[1])
    if prefix_kv is not None:
        for layer, (k, v) in enumerate(zip(*prefix_kv)):
            DynamicCache.update(cache, k[None], v[None], layer)
    return cache
