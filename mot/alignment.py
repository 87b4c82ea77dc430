"""Token alignment between two tokenizers of the same text, by character overlap (DESIGN.md §2).

Each target token gets weights over source tokens: the share of its characters each source token
covers, rows normalized to sum to 1. Whitespace is not content: a byte-level (`Ġword`) or
SentencePiece (`▁word`) token's span is trimmed to its non-space characters before overlapping, so
" word" and "word" align. Tokens with no characters (special tokens, offsets (0, 0)) or no overlap
take the nearest source token by span distance; those are counted, never silent. The same
tokenization on both sides (one family's shared tokenizer) aligns as the identity, also where
byte-level tokens split one character and so share its span.
No decode / re-encode round trips: only the offset mappings of the two tokenizations.
"""

import logging
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)


@dataclass
class Alignment:
    weights: torch.Tensor  # (T_target, T_source) float32, rows sum to 1
    nearest: int  # target tokens that overlapped no source token and took the nearest one
    empty_target: int  # target tokens with an empty span (specials)

    @property
    def misaligned(self) -> int:
        return self.nearest


def trimmed_spans(text: str, offsets: torch.Tensor) -> torch.Tensor:
    """(T, 2) spans without leading/trailing whitespace; an all-space token keeps its raw span."""
    spans = offsets.clone().long()
    for i, (start, end) in enumerate(offsets.tolist()):
        s, e = start, end
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            spans[i, 0], spans[i, 1] = s, e
    return spans


def align(text: str, target_offsets: torch.Tensor, source_offsets: torch.Tensor) -> Alignment:
    """Row-normalized character-overlap weights (T_target, T_source) for one text."""
    if source_offsets.shape[0] == 0:
        raise ValueError("cannot align to an empty source tokenization")
    if torch.equal(target_offsets, source_offsets):  # one tokenizer: each token reads its own
        empty = int(((target_offsets[:, 1] - target_offsets[:, 0]) <= 0).sum())
        return Alignment(torch.eye(target_offsets.shape[0]), 0, empty)
    tgt = trimmed_spans(text, target_offsets).float()  # (Tt, 2)
    src = trimmed_spans(text, source_offsets).float()  # (Ts, 2)
    lo = torch.maximum(tgt[:, None, 0], src[None, :, 0])
    hi = torch.minimum(tgt[:, None, 1], src[None, :, 1])
    overlap = (hi - lo).clamp(min=0)  # (Tt, Ts) characters shared
    rows = overlap.sum(dim=1)
    empty_target = int(((tgt[:, 1] - tgt[:, 0]) <= 0).sum())
    missing = rows <= 0
    if missing.any():
        # nearest source span by the gap between spans (0 when touching); ties to the earlier token
        gap = torch.maximum(src[None, :, 0] - tgt[missing, None, 1], tgt[missing, None, 0] - src[None, :, 1])
        nearest = gap.clamp(min=0).argmin(dim=1)
        overlap[missing] = 0.0
        overlap[missing.nonzero()[:, 0], nearest] = 1.0
        rows = overlap.sum(dim=1)
    weights = overlap / rows[:, None]
    result = Alignment(weights, int(missing.sum()), empty_target)
    if result.nearest:
        log.debug("alignment: %d of %d target tokens had no overlap and took the nearest source token",
                  result.nearest, weights.shape[0])
    return result
