"""Integer storage of chunk caches, KIVI-style: keys quantized per channel, values per token.

Keys have a few channels of large magnitude (outliers that stay in the same channels across
tokens), so each channel (of every head) gets its own range over a group of `GROUP` tokens; values
have no such channels, so each token gets its own range over a group of `GROUP` of its channels
(all heads side by side). Ranges are asymmetric (the group's minimum and its step, both fp16),
values rounded to the nearest of 2**bits levels. int8: one byte a value; int4: two values a byte
(the low nibble first). The ranges cost 4 bytes per GROUP values: int8 takes 0.516 of fp16's
bytes, int4 0.266.

    quantize(x (H, T, D), "int8"|"int4", per="channel"|"token") -> {"q": uint8, "min": fp16, "step": fp16}
    dequantize(those, shape, bits, per) -> (H, T, D) float32
"""

import torch

BITS = {"int8": 8, "int4": 4}
GROUP = 128  # tokens per key range, channels per value range


def _rows(x: torch.Tensor, per: str) -> torch.Tensor:
    """(H, T, D) -> (rows, length), the axis quantized together last: (H * D, T) per channel,
    (T, H * D) per token."""
    heads, tokens, dim = x.shape
    if per == "channel":
        return x.permute(0, 2, 1).reshape(heads * dim, tokens)
    return x.permute(1, 0, 2).reshape(tokens, heads * dim)


def _unrows(rows: torch.Tensor, shape: tuple, per: str) -> torch.Tensor:
    heads, tokens, dim = shape
    if per == "channel":
        return rows.reshape(heads, dim, tokens).permute(0, 2, 1).contiguous()
    return rows.reshape(tokens, heads, dim).permute(1, 0, 2).contiguous()


def quantize(x: torch.Tensor, dtype: str, per: str) -> dict:
    """Integer codes (rows, length, or length/2 rounded up for int4), group minimums and steps
    (rows, groups, 1) of `x` (H, T, D); the last group of a row may be shorter than GROUP."""
    bits = BITS[dtype]
    rows = _rows(x.float(), per)  # (rows, length)
    length = rows.shape[-1]
    pad = (-length) % GROUP  # padded with the row's last value: no effect on a group's range
    grouped = torch.cat([rows, rows[..., -1:].expand(*rows.shape[:-1], pad)], -1).unflatten(-1, (-1, GROUP))
    low, high = grouped.amin(-1, keepdim=True), grouped.amax(-1, keepdim=True)  # (rows, groups, 1)
    step16, low16 = ((high - low) / (2 ** bits - 1)).clamp_min(1e-8).half(), low.half()
    # quantized against the stored (fp16) range, so that decoding meets the same grid
    q = torch.round((grouped - low16.float()) / step16.float()).clamp(0, 2 ** bits - 1).to(torch.uint8)
    q = q.flatten(-2)[..., :length]  # (rows, length)
    if bits == 4:
        q = torch.nn.functional.pad(q, (0, length % 2))
        q = q[..., 0::2] | (q[..., 1::2] << 4)  # (rows, ceil(length / 2))
    return {"q": q.contiguous(), "min": low16.contiguous(), "step": step16.contiguous()}


def dequantize(parts: dict, shape: tuple, dtype: str, per: str) -> torch.Tensor:
    """(H, T, D) float32 from `quantize`'s parts; `shape` is the original (H, T, D)."""
    heads, tokens, dim = shape
    length = tokens if per == "channel" else heads * dim
    q = parts["q"]
    if BITS[dtype] == 4:
        q = torch.stack([q & 0x0F, q >> 4], dim=-1).flatten(-2)[..., :length]  # (rows, length)
    pad = (-length) % GROUP
    grouped = torch.nn.functional.pad(q.float(), (0, pad)).unflatten(-1, (-1, GROUP))  # (rows, groups, GROUP)
    rows = (grouped * parts["step"].float() + parts["min"].float()).flatten(-2)[..., :length]
    return _unrows(rows, shape, per)
