"""A mixture of translator experts with a per-token router, for one of K or V of one target layer.

    x (N, F) aligned source features
    base(x)                     shared linear map, initialised from the closed-form ridge solution
    expert e: delta_e(x) = down_e(gelu(up_e(norm(x))))   low-rank MLP, `down` zero-initialised
    router: logits = mlp(norm(x)) -> top-k masked softmax gates g (N, E)
    y = base(x) + sum_e g_e delta_e(x)          (N, D)

Each expert's full map is base + delta_e; since the gates sum to 1 this equals the gated sum of the
experts, with the linear trunk stored once (it keeps shipped checkpoints small). With `down` at zero
the mixture starts exactly at the ridge baseline. kind "single": one expert, no router (the single
projection path); kind "ridge": base only.
"""

import torch
import torch.nn.functional as F
from torch import nn

from cag.translations import TranslatorKind

EXPERTS_OF = {TranslatorKind.SINGLE: lambda experts: 1, TranslatorKind.MOT: lambda experts: experts,
              TranslatorKind.RIDGE: lambda experts: 0}  # experts per mixture, by kind


class Mixture(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, kind: TranslatorKind = TranslatorKind.MOT, experts: int = 4,
                 top_k: int = 2, rank: int = 24, router_hidden: int = 32):
        super().__init__()
        self.kind = TranslatorKind(kind)
        self.experts = EXPERTS_OF[self.kind](experts)
        self.top_k = min(top_k, self.experts) if self.experts else 0
        self.base = nn.Linear(in_dim, out_dim)
        self.register_buffer("mean", torch.zeros(in_dim))
        self.register_buffer("scale", torch.ones(in_dim))
        if self.experts:
            self.up = nn.Parameter(torch.randn(self.experts, in_dim, rank) / in_dim ** 0.5)
            self.up_bias = nn.Parameter(torch.zeros(self.experts, rank))
            self.down = nn.Parameter(torch.zeros(self.experts, rank, out_dim))
        if self.experts > 1:
            self.router = nn.Sequential(nn.Linear(in_dim, router_hidden), nn.GELU(),
                                        nn.Linear(router_hidden, self.experts))

    def normalized(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale

    def gates(self, xn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, E) top-k masked softmax over the router's logits, and the unmasked softmax."""
        logits = self.router(xn)
        top = logits.topk(self.top_k, dim=-1)
        masked = torch.full_like(logits, float("-inf")).scatter(-1, top.indices, top.values)
        return masked.softmax(dim=-1), logits.softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, F) -> (N, D) and the router load-balance loss (0 without a router)."""
        y = self.base(x)
        if not self.experts:
            return y, x.new_zeros(())
        xn = self.normalized(x)
        hidden = F.gelu(torch.einsum("nf,efr->ner", xn, self.up) + self.up_bias)  # (N, E, r)
        delta = torch.einsum("ner,erd->ned", hidden, self.down)  # (N, E, D)
        if self.experts == 1:
            return y + delta[:, 0], x.new_zeros(())
        gates, probs = self.gates(xn)  # (N, E) each
        y = y + torch.einsum("ne,ned->nd", gates, delta)
        return y, load_balance(probs, gates)


def load_balance(probs: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """Switch-style balance: E * sum_e (share of tokens routed to e) * (mean router prob of e)."""
    experts = probs.shape[-1]
    routed = (gates > 0).float().mean(dim=0)
    return experts * (routed * probs.mean(dim=0)).sum()
