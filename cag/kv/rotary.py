"""Remove and re-apply a rotary model's position rotation on stored keys.

The only model-specific math in cag. cos/sin come from the model's own rotary module (so rope
scaling, partial rotary and Gemma3's per-layer-type bases are the model's), and the rotation is the
rotate-half convention shared by Llama, Qwen2 and Gemma3:
    k_rot = k * cos + rotate_half(k) * sin
Its inverse, exact also when cos/sin carry an attention scaling s (cos^2 + sin^2 = s^2):
    k = (k_rot * cos - rotate_half(k_rot) * sin) / (cos^2 + sin^2)
"""

import torch

from cag.models.geometry import KVGeometry


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary:
    """cos/sin at arbitrary positions for each layer of one rotary model."""

    def __init__(self, model, geometry: KVGeometry):
        if not geometry.is_rotary:
            raise ValueError(f"{geometry.family} uses absolute positions, not rotary")
        self.geometry = geometry
        self.module = model.base_model.rotary_emb
        # Gemma3-style modules keep one rope setting per layer type (rope_type is a dict)
        self.per_layer_type = isinstance(getattr(self.module, "rope_type", None), dict)
        # layer type -> (positions, cos, sin): every layer of a type shares them, so a long context's
        # cos/sin (16k positions: a third of its assembly) are computed once per type, not per layer
        self._last: dict = {}

    @torch.no_grad()
    def cos_sin(self, positions: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin shaped (T, rotary_dim) in fp32 for 1-D integer `positions`."""
        kind = self.geometry.layer_types[layer] if self.per_layer_type else None
        last = self._last.get(kind)
        if last is not None and last[0] is positions:  # the same tensor object: the same positions
            return last[1], last[2]
        probe = torch.zeros(1, dtype=torch.float32, device=positions.device)
        pos = positions.reshape(1, -1)
        cos, sin = self.module(probe, pos, kind) if self.per_layer_type else self.module(probe, pos)
        self._last[kind] = (positions, cos[0].float(), sin[0].float())
        return self._last[kind][1], self._last[kind][2]

    def apply(self, keys: torch.Tensor, positions: torch.Tensor, layer: int) -> torch.Tensor:
        """Rotate position-free `keys` (..., T, head_dim) to `positions` (T,)."""
        cos, sin = self.cos_sin(positions, layer)
        return _rotate(keys, cos, sin, inverse=False)

    def remove(self, keys: torch.Tensor, positions: torch.Tensor, layer: int) -> torch.Tensor:
        """Undo the rotation of `keys` (..., T, head_dim) that sit at `positions` (T,)."""
        cos, sin = self.cos_sin(positions, layer)
        return _rotate(keys, cos, sin, inverse=True)


def _rotate(keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool) -> torch.Tensor:
    dtype = keys.dtype
    k = keys.float()
    rot_dim = cos.shape[-1]  # partial rotary: only the first rot_dim features turn
    k_rot, k_pass = k[..., :rot_dim], k[..., rot_dim:]
    if inverse:
        out = (k_rot * cos - _rotate_half(k_rot) * sin) / (cos * cos + sin * sin)
    else:
        out = k_rot * cos + _rotate_half(k_rot) * sin
    return torch.cat((out, k_pass), dim=-1).to(dtype)
