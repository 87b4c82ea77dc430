"""Source features for a target layer: the paired source layers' K and V, aligned to target tokens.

    source chunk K/V per layer (kv_heads_s, T_s, head_dim_s), keys position-free for rotary sources
    -> per paired layer flatten heads: K (T_s, Hs*Ds), V (T_s, Hs*Ds)
    -> concatenate [K_a, V_a, K_b, V_b, ...] -> (T_s, F)
    -> alignment weights (T_t, T_s) @ -> (T_t, F)
    -> (absolute-position targets) append sinusoidal features of the target position -> (T_t, F + P)
"""

import math

import torch


def flatten_heads(kv: torch.Tensor) -> torch.Tensor:
    """(heads, T, head_dim) -> (T, heads * head_dim)."""
    heads, tokens, dim = kv.shape
    return kv.permute(1, 0, 2).reshape(tokens, heads * dim)


def unflatten_heads(flat: torch.Tensor, heads: int) -> torch.Tensor:
    """(T, heads * head_dim) -> (heads, T, head_dim)."""
    tokens, width = flat.shape
    return flat.reshape(tokens, heads, width // heads).permute(1, 0, 2)


def layer_features(keys: list, values: list, source_layers: list[int]) -> torch.Tensor:
    """(T_s, F) for one target layer from per-layer source K/V lists."""
    parts = []
    for layer in source_layers:
        parts.append(flatten_heads(keys[layer].float()))
        parts.append(flatten_heads(values[layer].float()))
    return torch.cat(parts, dim=-1)


def position_features(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """(T, dim) sinusoidal features of absolute positions (for GPT-2 / OPT targets)."""
    if dim == 0:
        return torch.zeros(positions.numel(), 0)
    half = dim // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / max(half, 1))
    angle = positions.float()[:, None] * freq[None]
    return torch.cat([angle.sin(), angle.cos()], dim=-1)


def feature_dim(source_kv_width: int, pairs_per_layer: int, position_dim: int) -> int:
    return 2 * source_kv_width * pairs_per_layer + position_dim
