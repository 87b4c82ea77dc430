"""Closed-form ridge fit of every mixture's linear trunk (and its input normalization).

Per target layer, with X the aligned source features and Y the native target K (position-free) or
V over all training tokens:
    W = (Cxx + lam * mean(diag Cxx) * I)^-1 Cxy,  b = mean(Y) - mean(X) W
on centered second moments accumulated in float64, so any number of windows fits in memory.
"""

import torch

from mot.features import flatten_heads


class _Moments:
    def __init__(self, in_dim: int, out_dim: int):
        self.n = 0
        self.sx = torch.zeros(in_dim, dtype=torch.float64)
        self.sxx = torch.zeros(in_dim, in_dim, dtype=torch.float64)
        self.sy = torch.zeros(out_dim, dtype=torch.float64)
        self.sxy = torch.zeros(in_dim, out_dim, dtype=torch.float64)

    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        x, y = x.detach().cpu().double(), y.detach().cpu().double()  # moments live on the CPU
        self.n += x.shape[0]
        self.sx += x.sum(0)
        self.sxx += x.T @ x
        self.sy += y.sum(0)
        self.sxy += x.T @ y


class RidgeFit:
    """Accumulates (features, native K/V) pairs for every target layer of a translator."""

    def __init__(self, translator):
        self.translator = translator
        in_dim, out_dim = translator.spec.in_dim, translator.spec.target.kv_width
        layers = len(translator.layers)
        self.k = [_Moments(in_dim, out_dim) for _ in range(layers)]
        self.v_sy = [torch.zeros(out_dim, dtype=torch.float64) for _ in range(layers)]
        self.v_sxy = [torch.zeros(in_dim, out_dim, dtype=torch.float64) for _ in range(layers)]

    @torch.no_grad()
    def add(self, src_keys: list, src_values: list, weights: torch.Tensor, tgt_keys: list,
            tgt_values: list, positions: torch.Tensor | None = None,
            tokens: torch.Tensor | None = None) -> None:
        """One chunk: source K/V lists, alignment (T_t, T_s), native target K/V lists (and the
        chunk's target token features when the translator reads them)."""
        inputs = self.translator.layer_inputs(src_keys, src_values, weights, positions, tokens)
        for layer, x in enumerate(inputs):
            self.k[layer].add(x, flatten_heads(tgt_keys[layer].float()))
            v = flatten_heads(tgt_values[layer].float()).cpu().double()
            self.v_sy[layer] += v.sum(0)
            self.v_sxy[layer] += x.cpu().double().T @ v

    @torch.no_grad()
    def solve(self, lam: float = 1e-2) -> dict:
        """Set every mixture's base (and input normalization); per-layer training R^2 is not
        computed here (see diagnostics)."""
        for layer, mod in enumerate(self.translator.layers):
            m = self.k[layer]
            mean_x = m.sx / m.n
            cxx = m.sxx / m.n - torch.outer(mean_x, mean_x)
            reg = lam * cxx.diagonal().mean().clamp(min=1e-12)
            inv = torch.linalg.inv(cxx + reg * torch.eye(cxx.shape[0], dtype=cxx.dtype))
            std = cxx.diagonal().clamp(min=1e-12).sqrt()
            for mixture, sy, sxy in ((mod.k, m.sy, m.sxy), (mod.v, self.v_sy[layer], self.v_sxy[layer])):
                mean_y = sy / m.n
                cxy = sxy / m.n - torch.outer(mean_x, mean_y)
                w = inv @ cxy  # (F, D)
                mixture.base.weight.copy_(w.T.float())
                mixture.base.bias.copy_((mean_y - mean_x @ w).float())
                mixture.mean.copy_(mean_x.float())
                mixture.scale.copy_(std.float())
        return {"tokens": self.k[0].n, "lambda": lam}
