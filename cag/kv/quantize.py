"""Integer storage of chunk caches, KIVI-style: keys quantized per channel, values per token.

Keys have a few channels of large magnitude (outliers that stay in the same channels across
tokens), so each channel (of every head) gets its own range over a group of tokens; values have no
such channels, so each token gets its own range over a group of its channels (all heads side by
side). Ranges are asymmetric (the group's minimum and its step, both fp16), values rounded to the
nearest of 2**bits levels; codes are packed little-endian into bytes (int4: two a byte, the low
nibble first; int3: eight in three bytes). The ranges cost 4 bytes per group.

A scheme (the registry SCHEMES, what `--cache-dtype` names) sets the bits and group of keys and of
values, and whether values are rotated first: a Hadamard rotation of each head's channels spreads a
token's large channels over all of them, so a range fits its group more tightly; reading undoes it.

    quantize(x (H, T, D), bits, per="channel"|"token", group) -> {"q": uint8, "min": fp16, "step": fp16}
    dequantize(those, shape, bits, per, group) -> (H, T, D) float32
"""

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class IntegerScheme:
    name: str
    key_bits: int
    key_group: int  # tokens per key range
    value_bits: int
    value_group: int  # channels per value range
    rotate_values: bool = False

    def fraction_of_fp16(self) -> float:
        """Stored bytes over fp16's for long chunks: codes plus 4 bytes of range per group."""
        return (self.key_bits + 32 / self.key_group + self.value_bits + 32 / self.value_group) / 32


SCHEMES = {s.name: s for s in (
    IntegerScheme("int8", 8, 128, 8, 128),
    IntegerScheme("int4", 4, 128, 4, 128),
    # keys int4 over 128 tokens, values int3 over 64 channels after rotation: 0.242 of fp16, under a
    # quarter. Values ranged per 64 channels (a head of the shipped models) and keys over 128 tokens
    # cost a quarter to a third less KL to fp16's answers than keys over 64 and values over 128,
    # at the same bytes (records/translated_quantization-smollm2-135m-qwen2.5-coder-0.5b-value-groups.json).
    IntegerScheme("int4k-int3v", 4, 128, 3, 64, rotate_values=True),
)}
# The groups of files written before a file recorded its own (cag.key_group, cag.value_group).
GROUPS_BEFORE_RECORDED = {"int4k-int3v": (64, 128)}


def hadamard(n: int) -> torch.Tensor:
    """The orthonormal (and symmetric) Sylvester Hadamard matrix (n, n); n a power of two."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"a Hadamard rotation needs a power-of-two size, not {n}")
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def can_rotate(head_dim: int) -> bool:
    return head_dim >= 1 and not head_dim & (head_dim - 1)


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


def _codes_per_unit(bits: int) -> int:
    """The fewest codes that fill whole bytes: 1 for int8, 2 for int4, 4 for int2, 8 for int3."""
    return 8 // math.gcd(bits, 8)


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """(rows, length) codes < 2**bits -> (rows, ceil(length / unit) * unit * bits / 8) uint8."""
    if bits == 8:
        return codes.to(torch.uint8)
    unit = _codes_per_unit(bits)
    codes = torch.nn.functional.pad(codes.to(torch.int64), (0, (-codes.shape[-1]) % unit))
    units = codes.unflatten(-1, (-1, unit))  # (rows, units, unit)
    word = (units << (bits * torch.arange(unit))).sum(-1, keepdim=True)  # at most 24 bits a unit
    return ((word >> (8 * torch.arange(unit * bits // 8))) & 0xFF).flatten(-2).to(torch.uint8)


def unpack(packed: torch.Tensor, bits: int, length: int) -> torch.Tensor:
    """Inverse of `pack`: (rows, length) int64 codes."""
    if bits == 8:
        return packed.to(torch.int64)
    unit = _codes_per_unit(bits)
    grouped = packed.to(torch.int64).unflatten(-1, (-1, unit * bits // 8))  # (rows, units, bytes)
    word = (grouped << (8 * torch.arange(grouped.shape[-1]))).sum(-1, keepdim=True)
    return ((word >> (bits * torch.arange(unit))) & (2 ** bits - 1)).flatten(-2)[..., :length]


def quantize(x: torch.Tensor, bits: int, per: str, group: int) -> dict:
    """Packed integer codes (rows, bytes) of `x` (H, T, D), group minimums and steps
    (rows, groups, 1); the last group of a row may be shorter than `group`."""
    rows = _rows(x.float(), per)  # (rows, length)
    length = rows.shape[-1]
    pad = (-length) % group  # padded with the row's last value: no effect on a group's range
    grouped = torch.cat([rows, rows[..., -1:].expand(*rows.shape[:-1], pad)], -1).unflatten(-1, (-1, group))
    low, high = grouped.amin(-1, keepdim=True), grouped.amax(-1, keepdim=True)  # (rows, groups, 1)
    step16, low16 = ((high - low) / (2 ** bits - 1)).clamp_min(1e-8).half(), low.half()
    # quantized against the stored (fp16) range, so that decoding meets the same grid
    q = torch.round((grouped - low16.float()) / step16.float()).clamp(0, 2 ** bits - 1)
    q = pack(q.flatten(-2)[..., :length], bits)
    return {"q": q.contiguous(), "min": low16.contiguous(), "step": step16.contiguous()}


def dequantize(parts: dict, shape: tuple, bits: int, per: str, group: int) -> torch.Tensor:
    """(H, T, D) float32 from `quantize`'s parts; `shape` is the original (H, T, D)."""
    heads, tokens, dim = shape
    length = tokens if per == "channel" else heads * dim
    q = unpack(parts["q"], bits, length)  # (rows, length)
    grouped = torch.nn.functional.pad(q.float(), (0, (-length) % group)).unflatten(-1, (-1, group))
    rows = (grouped * parts["step"].float() + parts["min"].float()).flatten(-2)[..., :length]
    return _unrows(rows, shape, per)
