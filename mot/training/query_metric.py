"""Key errors as the target's attention sees them: weighted by its own queries.

A key matters only through the logits q . k its queries form with it, so an error e in a key costs
(q . e)^2, not |e|^2. Averaged over the target's queries this is e^T S e with S the second moment
of its queries, per layer and KV head (summed over the query heads that share it). Stored keys are
position-free; at attention the query at m meets the key at m - d as (R(d) q) . k, so S is taken
over queries turned by a random distance d in [1, max_distance] (an expectation over relative
positions, not over absolute ones).

The loss this module gives (`query_weighted_error`) is that logit error divided by the logit spread
of the target's own keys (their token-varying part, e^T S e with e the centered keys): 1.0 means
the translated keys err as much as the keys themselves vary. Dimensions the queries do not read
(Qwen2's large constant key biases, for one, meet every query alike) then cost nothing, and the
ones they read most cost most: measured, the plain normalized MSE spends its weight elsewhere.
"""

import torch

from cag.errors import CagError
from cag.kv.rotary import Rotary


def attention_modules(lm) -> list:
    """The self-attention module of each decoder layer (Llama / Qwen2 / Gemma3 layout: a separate
    q_proj); other layouts (GPT-2's fused c_attn, ...) are refused with a clear error."""
    layers = getattr(lm.model.base_model, "layers", None)
    if layers is None or not all(hasattr(getattr(l, "self_attn", None), "q_proj") for l in layers):
        raise CagError(f"--key-loss query reads the target's queries from a separate q_proj, which "
                       f"{lm.name} ({lm.geometry.family}) does not have; use --key-loss nmse.")
    return [layer.self_attn for layer in layers]


def window_sequences(windows: list, prefix) -> list[torch.Tensor]:
    """The token ids the target reads for each prepared window: its prefix, the chunks in one
    pass, the continuation (what query_moments reads)."""
    prefix = torch.as_tensor(list(prefix), dtype=torch.int64)
    return [torch.cat([prefix, *(c.tgt_ids for c in w.chunks), w.cont_ids]) for w in windows]


@torch.no_grad()
def query_moments(lm, sequences: list, max_distance: int = 512, seed: int = 0) -> list[torch.Tensor]:
    """Per target layer (kv_heads, D, D): the mean over the query tokens of `sequences` (1-D token
    id tensors, each read from position 0) of r r^T, r a query (per head, position-free, after the
    model's own query norm where it has one) turned by a random distance, summed over the
    query heads of each KV head."""
    geometry = lm.geometry
    rotary = Rotary(lm.model, geometry) if geometry.is_rotary else None
    modules = attention_modules(lm)
    heads = lm.model.config.num_attention_heads
    kv_heads, dim = geometry.kv_heads, geometry.head_dim
    captured: dict[int, list] = {i: [] for i in range(len(modules))}

    def hook(index, module):
        def grab(_, __, output):  # (B, T, heads * D), before rotation
            q = output.float().reshape(output.shape[0], output.shape[1], heads, dim)
            norm = getattr(module, "q_norm", None)
            captured[index].append((norm(q) if norm is not None else q)[0].transpose(0, 1).cpu())
        return grab

    handles = [m.q_proj.register_forward_hook(hook(i, m)) for i, m in enumerate(modules)]
    try:
        for ids in sequences:
            lm.model(input_ids=ids[None].to(lm.device), use_cache=False, logits_to_keep=1)
    finally:
        for h in handles:
            h.remove()
    generator = torch.Generator().manual_seed(seed)
    moments = []
    for layer in range(len(modules)):
        q = torch.cat(captured[layer], dim=1)  # (heads, N, D)
        if rotary is not None:
            distance = torch.randint(1, max_distance + 1, (q.shape[1],), generator=generator)
            # q_rot(m) . k_rot(m - d) = (R(m) q) . (R(m - d) k) = (R(d) q) . k
            q = rotary.apply(q, distance, layer)
        q = q.reshape(kv_heads, heads // kv_heads, q.shape[1], dim)
        moments.append(torch.einsum("gqnd,gqne->gde", q, q) / q.shape[2])  # (kv_heads, D, D)
    return moments


def query_weighted_error(pred: torch.Tensor, target: torch.Tensor, moment: torch.Tensor) -> torch.Tensor:
    """Logit error of predicted keys `pred` against `target` (both (H, T, D)) under the query
    moment (H, D, D), relative to the logit spread of the target's centered keys."""
    target = target.to(pred.device).float()
    moment = moment.to(pred.device)
    centered = target - target.mean(dim=1, keepdim=True)
    return quadratic(pred.float() - target, moment) / quadratic(centered, moment).clamp(min=1e-8)


def quadratic(x: torch.Tensor, moment: torch.Tensor) -> torch.Tensor:
    """Sum over heads and tokens of x^T S x for keys (or key errors) x (H, T, D), S (H, D, D):
    the summed squared logit change they make for the queries S was taken over."""
    return torch.einsum("htd,hde,hte->", x, moment.to(x.device), x)


def layers_query_error(preds: list, targets: list, moments: list) -> torch.Tensor:
    return torch.stack([query_weighted_error(p, t, m) for p, t, m in zip(preds, targets, moments)]).mean()
