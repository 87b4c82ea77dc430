"""Closed-form ridge fit of every mixture's linear trunk (and its input normalization).

Per target layer, with X the aligned source features and Y the native target K (position-free) or
V over all training tokens:
    W = (Cxx + lam * mean(diag Cxx) * I)^-1 Cxy,  b = mean(Y) - mean(X) W
on centered second moments accumulated in float64, so any number of windows fits in memory.

A layer's features are its own aligned source features (F_s) beside features every layer shares
(F_h: target positions, target token embeddings). Their block of X^T X is the same for every layer,
so it is accumulated once:

    X_l = [S_l | H]      X_l^T X_l = [[S_l^T S_l, S_l^T H], [H^T S_l, H^T H]]
"""

import torch

from mot.features import flatten_heads


def _double(x: torch.Tensor) -> torch.Tensor:
    return x.detach().cpu().double()  # moments live on the CPU


class RidgeFit:
    """Accumulates (features, native K/V) pairs for every target layer of a translator."""

    def __init__(self, translator):
        self.translator = translator
        spec = translator.spec
        out_dim, layers = spec.target.kv_width, len(translator.layers)
        own = spec.in_dim - spec.shared_dim
        zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64)
        self.n = 0
        self.s, self.ss = [zeros(own) for _ in range(layers)], [zeros(own, own) for _ in range(layers)]
        self.sh = [zeros(own, spec.shared_dim) for _ in range(layers)]
        self.h, self.hh = zeros(spec.shared_dim), zeros(spec.shared_dim, spec.shared_dim)
        # per layer, for K and V: sum of Y and X^T Y
        self.sy = {name: [zeros(out_dim) for _ in range(layers)] for name in "kv"}
        self.sxy = {name: [zeros(spec.in_dim, out_dim) for _ in range(layers)] for name in "kv"}

    @torch.no_grad()
    def add(self, src_keys: list, src_values: list, weights: torch.Tensor, tgt_keys: list,
            tgt_values: list, positions: torch.Tensor | None = None,
            tokens: torch.Tensor | None = None) -> None:
        """One chunk: source K/V lists, alignment (T_t, T_s), native target K/V lists (and the
        chunk's target token features when the translator reads them)."""
        own, shared = self.translator.layer_parts(src_keys, src_values, weights, positions, tokens)
        h = _double(shared) if shared is not None else torch.zeros(own[0].shape[0], 0, dtype=torch.float64)
        self.n += h.shape[0]
        self.h += h.sum(0)
        self.hh += h.T @ h
        for layer, s in enumerate(own):
            s = _double(s)  # (T, F_s)
            self.s[layer] += s.sum(0)
            self.ss[layer] += s.T @ s
            self.sh[layer] += s.T @ h
            x = torch.cat([s, h], dim=-1)  # (T, F)
            for name, kv in (("k", tgt_keys[layer]), ("v", tgt_values[layer])):
                y = _double(flatten_heads(kv.float()))  # (T, D)
                self.sy[name][layer] += y.sum(0)
                self.sxy[name][layer] += x.T @ y

    def _moments(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(F,) sum and (F, F) X^T X of one layer's features."""
        sh = self.sh[layer]
        sxx = torch.cat([torch.cat([self.ss[layer], sh], 1), torch.cat([sh.T, self.hh], 1)], 0)
        return torch.cat([self.s[layer], self.h]), sxx

    @torch.no_grad()
    def solve(self, lam: float = 1e-2) -> dict:
        """Set every mixture's base (and input normalization); per-layer training R^2 is not
        computed here (see diagnostics)."""
        for layer, mod in enumerate(self.translator.layers):
            sx, sxx = self._moments(layer)
            mean_x = sx / self.n
            cxx = sxx / self.n - torch.outer(mean_x, mean_x)
            reg = lam * cxx.diagonal().mean().clamp(min=1e-12)
            inv = torch.linalg.inv(cxx + reg * torch.eye(cxx.shape[0], dtype=cxx.dtype))
            std = cxx.diagonal().clamp(min=1e-12).sqrt()
            for name, mixture in (("k", mod.k), ("v", mod.v)):
                mean_y = self.sy[name][layer] / self.n
                cxy = self.sxy[name][layer] / self.n - torch.outer(mean_x, mean_y)
                w = inv @ cxy  # (F, D)
                mixture.base.weight.copy_(w.T.float())
                mixture.base.bias.copy_((mean_y - mean_x @ w).float())
                mixture.mean.copy_(mean_x.float())
                mixture.scale.copy_(std.float())
        return {"tokens": self.n, "lambda": lam}
