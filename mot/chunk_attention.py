"""Bidirectional attention over one chunk's tokens, in front of a target layer's K/V mixtures.

A mixture maps each target token's aligned source features on their own. A chunk is translated
whole, so every token may first read the rest of its chunk, both ways (the paper's translators
attend over the chunk too):

    x (T, F) aligned source features of one target layer
    h = layernorm(x)
    q, k, v = split(h @ W_qkv)           (heads, T, d) each; rotary on q, k at chunk positions 0..T-1
    a = softmax(q k^T / sqrt(d)) v        (heads, T, d)   no causal mask: the whole chunk is known
    x' = x + out(concat heads of a)       (T, F)

`out` starts at zero, so a new translator starts exactly where its mixtures' ridge fit puts it.
"""

import torch
import torch.nn.functional as F
from torch import nn


def _rotary(tokens: int, dim: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (T, dim) for positions 0..T-1 (half-split layout, base 10000)."""
    half = dim // 2
    freq = 10000.0 ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angle = torch.arange(tokens, device=device, dtype=torch.float32)[:, None] * freq[None]  # (T, half)
    angle = torch.cat([angle, angle], dim=-1)
    return angle.cos().to(dtype), angle.sin().to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """(heads, T, d) rotated by position."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class ChunkAttention(nn.Module):
    def __init__(self, in_dim: int, dim: int = 64, heads: int = 4):
        super().__init__()
        if dim % heads or (dim // heads) % 2:
            raise ValueError(f"attention width {dim} must split into {heads} heads of an even width")
        self.heads = heads
        self.norm = nn.LayerNorm(in_dim)
        self.qkv = nn.Linear(in_dim, 3 * dim)
        self.out = nn.Linear(dim, in_dim)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(T, F) -> (T, F)."""
        tokens = x.shape[0]
        q, k, v = self.qkv(self.norm(x)).view(tokens, 3, self.heads, -1).permute(1, 2, 0, 3)  # (H, T, d) each
        cos, sin = _rotary(tokens, q.shape[-1], x.device, q.dtype)
        attended = F.scaled_dot_product_attention(_rotate(q, cos, sin), _rotate(k, cos, sin), v)  # (H, T, d)
        return x + self.out(attended.transpose(0, 1).reshape(tokens, -1))
