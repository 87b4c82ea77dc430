"""Closed-form ridge fit of every mixture's linear trunk (and its input normalization).

Per target layer, with X the aligned source features and Y the native target K (position-free) or
V over all training tokens:
    W = (Cxx + lam * mean(diag Cxx) * I)^-1 Cxy,  b = mean(Y) - mean(X) W
on centered second moments accumulated in float64, so any number of windows fits in memory.

A layer's features are its own aligned source features (F_s) beside features every layer shares
(F_h: target positions, target token embeddings). Their block of X^T X is the same for every layer,
so it is accumulated once:

    X_l = [S_l | H]      X_l^T X_l = [[S_l^T S_l, S_l^T H], [H^T S_l, H^T H]]

With a token projection (`token_rank` r), the token features E (part of H) reach every layer
through one shared map P (E -> r). P is the reduced-rank ridge solution: fit every layer's full
ridge map, stack the token rows of all K and V maps (each output scaled to unit variance, so every
mixture counts alike, as in the normalized reconstruction loss), and keep the r directions that
predict most of them, measured in the token features' own covariance C:
    C^(1/2) W_tokens = U S V^T,   P = C^(-1/2) U_r      (projected features come out whitened)
then refit every layer on [S_l | positions | E P] from the same moments (X -> X T is linear).
"""

import torch

from mot.features import flatten_heads


def _double(x: torch.Tensor) -> torch.Tensor:
    return x.detach().cpu().double()  # moments live on the CPU


def solve_ridge(n: int, sx: torch.Tensor, sxx: torch.Tensor, targets: dict, lam: float) -> dict:
    """From sums over n rows: sx (F,) of X, sxx (F, F) of X^T X, and per target name (X^T Y (F, D),
    sum of Y (D,)): name -> (W (F, D), b (D,)) minimising |X W + b - Y|^2 + lam * mean(diag Cxx) |W|^2
    on centered moments, plus the features' "mean" and "std"."""
    mean_x = sx / n
    cxx = sxx / n - torch.outer(mean_x, mean_x)
    reg = lam * cxx.diagonal().mean().clamp(min=1e-12)
    inv = torch.linalg.inv(cxx + reg * torch.eye(cxx.shape[0], dtype=cxx.dtype))
    fits = {"mean": mean_x, "std": cxx.diagonal().clamp(min=1e-12).sqrt()}
    for name, (sxy, sy) in targets.items():
        mean_y = sy / n
        w = inv @ (sxy / n - torch.outer(mean_x, mean_y))  # (F, D)
        fits[name] = (w, mean_y - mean_x @ w)
    return fits


class RidgeFit:
    """Accumulates (features, native K/V) pairs for every target layer of a translator."""

    def __init__(self, translator):
        self.translator = translator
        spec = translator.spec
        out_dim, layers = spec.target.kv_width, len(translator.layers)
        own = self.own = spec.in_dim - spec.shared_dim
        shared = spec.position_dim + spec.token_dim  # before any token projection
        zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64)
        self.n = 0
        self.s, self.ss = [zeros(own) for _ in range(layers)], [zeros(own, own) for _ in range(layers)]
        self.sh = [zeros(own, shared) for _ in range(layers)]
        self.h, self.hh = zeros(shared), zeros(shared, shared)
        # per layer, for K and V: sum of Y, sum of Y^2 and X^T Y
        self.sy = {name: [zeros(out_dim) for _ in range(layers)] for name in "kv"}
        self.syy = {name: [zeros(()) for _ in range(layers)] for name in "kv"}
        self.sxy = {name: [zeros(own + shared, out_dim) for _ in range(layers)] for name in "kv"}

    @torch.no_grad()
    def add(self, src_keys: list, src_values: list, weights: torch.Tensor, tgt_keys: list,
            tgt_values: list, positions: torch.Tensor | None = None,
            tokens: torch.Tensor | None = None) -> None:
        """One chunk: source K/V lists, alignment (T_t, T_s), native target K/V lists (and the
        chunk's target token features when the translator reads them)."""
        own, shared = self.translator.layer_parts(src_keys, src_values, weights, positions, tokens, project=False)
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
                self.syy[name][layer] += y.pow(2).sum()
                self.sxy[name][layer] += x.T @ y

    def _moments(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(F,) sum and (F, F) X^T X of one layer's features."""
        sh = self.sh[layer]
        sxx = torch.cat([torch.cat([self.ss[layer], sh], 1), torch.cat([sh.T, self.hh], 1)], 0)
        return torch.cat([self.s[layer], self.h]), sxx

    def _fit(self, sx, sxx, sxy: dict, lam: float) -> dict:
        """name -> (W (F, D), b (D,)) for K and V, and the features' mean and std."""
        return solve_ridge(self.n, sx, sxx, sxy, lam)

    def _token_projection(self, lam: float, rank: int) -> torch.Tensor:
        """(token_dim, rank) P: the reduced-rank solution over every layer's full ridge map."""
        start = self.own + self.translator.spec.position_dim  # first token feature row
        blocks = []
        for layer in range(len(self.translator.layers)):
            sx, sxx = self._moments(layer)
            fits = self._fit(sx, sxx, {n: (self.sxy[n][layer], self.sy[n][layer]) for n in "kv"}, lam)
            for name in "kv":
                mean_y = self.sy[name][layer] / self.n  # (D,)
                # the output's variance, averaged over its D dimensions
                var = (self.syy[name][layer] / (self.n * mean_y.numel()) - mean_y.pow(2).mean()).clamp(min=1e-12)
                blocks.append(fits[name][0][start:] / var.sqrt())
        weights = torch.cat(blocks, 1)  # (token_dim, 2 L D)
        mean = self.h[start - self.own:] / self.n
        cov = self.hh[start - self.own:, start - self.own:] / self.n - torch.outer(mean, mean)
        values, vectors = torch.linalg.eigh(cov)
        values = values.clamp(min=1e-6 * values.max())
        root, inverse_root = (vectors * values.sqrt()) @ vectors.T, (vectors / values.sqrt()) @ vectors.T
        u, _, _ = torch.linalg.svd(root @ weights, full_matrices=False)
        return inverse_root @ u[:, :rank]

    @torch.no_grad()
    def solve(self, lam: float = 1e-2) -> dict:
        """Set every mixture's base (and input normalization), and the token projection when the
        translator has one; per-layer training R^2 is not computed here (see diagnostics)."""
        spec = self.translator.spec
        raw = self.own + spec.position_dim + spec.token_dim
        transform = torch.eye(raw, dtype=torch.float64)  # raw features -> the translator's (raw, F)
        if spec.token_rank:
            projection = self._token_projection(lam, spec.token_rank)
            start = self.own + spec.position_dim
            transform = torch.cat([transform[:, :start], torch.cat(
                [torch.zeros(start, spec.token_rank, dtype=torch.float64), projection])], 1)
            self.translator.token_projection.copy_(projection.float())
        for layer, mod in enumerate(self.translator.layers):
            sx, sxx = self._moments(layer)
            sxy = {n: (transform.T @ self.sxy[n][layer], self.sy[n][layer]) for n in "kv"}
            fits = self._fit(transform.T @ sx, transform.T @ sxx @ transform, sxy, lam)
            for name, mixture in (("k", mod.k), ("v", mod.v)):
                w, b = fits[name]
                mixture.base.weight.copy_(w.T.float())
                mixture.base.bias.copy_(b.float())
                mixture.mean.copy_(fits["mean"].float())
                mixture.scale.copy_(fits["std"].float())
        return {"tokens": self.n, "lambda": lam}
