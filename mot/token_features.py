"""The target's own token embeddings as translator input (issue: translated caches that keep the facts).

A translated cache keeps a text's topic and loses its facts: names, numbers, dates come out wrong.
Which token sits at a position is what answering copies, and the source model's K/V carry it only
as well as the source's upper layers keep it. The target tokenizes the chunk anyway (alignment), and
its input embedding table holds each token's identity in the target's own space, so every target
layer's translator may read it directly, at the cost of a table lookup (no model compute over the
context):

    target token ids (T,)  -> E[ids] (T, H)          the target's input embedding rows
    -> e / rms(e)           (T, H)                    unit RMS: the scale of the source features
    -> [own, previous, ...] (T, count * H)            the token and the `count - 1` tokens before it
                                                      in its chunk (zeros before the chunk's start)

Layer 0 of a pre-norm target is then linear in the features (its K/V are projections of the
normalized embedding), so even the closed-form ridge fit reproduces it.
"""

import torch


def embedding_table(lm) -> torch.Tensor:
    """(V, H) the target's input embedding weights (never trained by a translator)."""
    return lm.model.get_input_embeddings().weight


def token_features(table: torch.Tensor, ids: torch.Tensor, count: int) -> torch.Tensor:
    """(T, count * H) float32 features of a chunk's target token ids; (T, 0) for count 0."""
    ids = torch.as_tensor(ids, dtype=torch.int64).to(table.device)
    if count == 0:
        return torch.zeros(ids.numel(), 0)
    rows = table[ids].detach().float()  # (T, H)
    rows = rows / rows.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    parts = [rows]
    for shift in range(1, count):
        earlier = torch.zeros_like(rows)
        earlier[shift:] = rows[:-shift]
        parts.append(earlier)
    return torch.cat(parts, dim=-1).cpu()
