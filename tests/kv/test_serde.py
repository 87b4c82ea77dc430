"""Chunk cache files: exact per dtype, metadata inside, damage detected and named."""

import pytest
import torch

from cag.errors import CagError, CorruptCacheError
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.serde import STORAGE_DTYPES, load_chunk_cache, save_chunk_cache
from tests.tiny_models import tiny_lm, tiny_tokenizer

TEXT = "Ada Lovelace wrote the report in 1999. Paris is the capital of France."


@pytest.fixture(scope="module")
def chunk():
    return prefill_chunk(tiny_lm("qwen2"), TEXT, prefix_ids=[tiny_tokenizer().bos_token_id],
                         doc_id="doc-1", chunk_index=3)


@pytest.mark.parametrize("dtype", sorted(STORAGE_DTYPES))
def test_save_load_is_exact_for_each_dtype(chunk, tmp_path, dtype):
    path = tmp_path / f"c-{dtype}.safetensors"
    written = save_chunk_cache(chunk, path, dtype=dtype)
    assert path.stat().st_size == written
    loaded = load_chunk_cache(path)
    target = STORAGE_DTYPES[dtype]
    for original, got in zip(chunk.keys + chunk.values, loaded.keys + loaded.values):
        assert got.dtype == target
        assert torch.equal(got, original.to(target))
    assert torch.equal(loaded.token_ids, chunk.token_ids)
    assert torch.equal(loaded.offsets, chunk.offsets)
    assert loaded.meta == chunk.meta
    assert loaded.text == TEXT
    assert loaded.meta.doc_id == "doc-1" and loaded.meta.chunk_index == 3


def test_offsets_point_at_the_token_text(chunk):
    tok = tiny_tokenizer()
    for token_id, (start, end) in zip(chunk.token_ids.tolist(), chunk.offsets.tolist()):
        assert tok.decode([token_id]).strip() == TEXT[start:end].strip()


def test_fp16_halves_the_kv_bytes(chunk, tmp_path):
    full = save_chunk_cache(chunk, tmp_path / "a.safetensors", dtype="fp32")
    half = save_chunk_cache(chunk, tmp_path / "b.safetensors", dtype="fp16")
    kv_fp32 = chunk.to(torch.float32).nbytes()
    assert abs((full - half) - kv_fp32 / 2) <= 64  # header sizes differ by a few digits only


def test_atomic_write_leaves_no_temp_files(chunk, tmp_path):
    save_chunk_cache(chunk, tmp_path / "c.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]


def test_flipped_byte_fails_the_checksum_and_names_the_file(chunk, tmp_path):
    path = tmp_path / "c.safetensors"
    save_chunk_cache(chunk, path)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # inside the last tensor's bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCacheError, match=str(path)):
        load_chunk_cache(path)


@pytest.mark.parametrize("keep", [4, 100, 0.5, 0.99])
def test_truncated_file_is_detected(chunk, tmp_path, keep):
    path = tmp_path / "c.safetensors"
    save_chunk_cache(chunk, path)
    data = path.read_bytes()
    cut = keep if isinstance(keep, int) else int(len(data) * keep)
    path.write_bytes(data[:cut])
    with pytest.raises(CorruptCacheError, match="truncated|corrupted"):
        load_chunk_cache(path)


def test_other_files_are_refused(tmp_path):
    from safetensors.torch import save_file
    path = tmp_path / "other.safetensors"
    save_file({"x": torch.zeros(2)}, path)
    with pytest.raises(CorruptCacheError, match="not a cag chunk cache"):
        load_chunk_cache(path)
    with pytest.raises(CagError, match="does not exist"):
        load_chunk_cache(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("dtype", ["int8", "int4", "int4k-int3v"])
def test_integer_storage_round_trips_within_its_steps_and_is_smaller(chunk, tmp_path, dtype):
    """Integer schemes (KIVI-style): every key within half a step of its channel group's range,
    every value within half a step of its token group's (after the rotation, for a scheme that
    rotates values: the error of a head's value vector then stays within sqrt(D) half-steps); at a
    real model's shapes (2 heads x 64, 256 tokens) the codes and ranges take the scheme's fraction
    of fp16's bytes: 0.516 for int8, 0.266 for int4, 0.242 for int4k-int3v."""
    from cag.kv.quantize import SCHEMES, hadamard, quantize
    scheme = SCHEMES[dtype]
    path = tmp_path / f"c-{dtype}.safetensors"
    save_chunk_cache(chunk, path, dtype=dtype)
    loaded = load_chunk_cache(path)
    assert loaded.meta == chunk.meta and torch.equal(loaded.token_ids, chunk.token_ids) and loaded.text == TEXT
    assert chunk.keys[0].shape[1] <= min(scheme.key_group, scheme.value_group)  # one group per row
    rotation = hadamard(chunk.meta.head_dim) if scheme.rotate_values else torch.eye(chunk.meta.head_dim)
    for original, got in zip(chunk.keys, loaded.keys):  # one range per channel over the tokens
        assert got.dtype == torch.float16 and got.shape == original.shape
        span = original.float().amax(1, keepdim=True) - original.float().amin(1, keepdim=True)
        step = span / (2 ** scheme.key_bits - 1)
        assert bool(((got.float() - original.float()).abs() <= step * 0.5 + 1e-2 * span + 1e-3).all())
    for original, got in zip(chunk.values, loaded.values):  # one per token over all heads' channels
        assert got.dtype == torch.float16 and got.shape == original.shape
        rotated = original.float() @ rotation
        span = rotated.amax((0, 2), keepdim=True) - rotated.amin((0, 2), keepdim=True)
        half_step = span / (2 ** scheme.value_bits - 1) * 0.5 + 1e-2 * span + 1e-3  # (1, T, 1)
        error = (got.float() - original.float()).norm(dim=-1, keepdim=True)  # (H, T, 1)
        assert bool((error <= half_step * chunk.meta.head_dim ** 0.5).all())  # any orthonormal rotation
        if not scheme.rotate_values:
            assert bool(((got.float() - original.float()).abs() <= half_step).all())
    x = torch.randn(2, 256, 64)
    stored = sum(t.numel() * t.element_size()
                 for t in [*quantize(x, scheme.key_bits, "channel", scheme.key_group).values(),
                           *quantize(x, scheme.value_bits, "token", scheme.value_group).values()])
    ratio = stored / (2 * x.numel() * 2)  # two tensors (K and V) in fp16
    assert ratio == pytest.approx(scheme.fraction_of_fp16(), abs=1e-3)
    assert ratio == pytest.approx({"int8": 0.516, "int4": 0.266, "int4k-int3v": 0.242}[dtype], abs=1e-3)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_codes_pack_into_bits_and_back(bits):
    """Packing keeps every code of any row length; int4 keeps the format of earlier stores (two codes a
    byte, the low nibble first), so their files still read."""
    from cag.kv.quantize import pack, unpack
    for length in (1, 7, 8, 13, 64):
        codes = torch.randint(0, 2 ** bits, (3, length))
        packed = pack(codes, bits)
        unit = {2: 4, 3: 8, 4: 2, 8: 1}[bits]  # codes that fill whole bytes
        assert packed.dtype == torch.uint8 and packed.shape[-1] == -(-length // unit) * unit * bits // 8
        assert torch.equal(unpack(packed, bits, length), codes)
        if bits == 4:
            even = torch.nn.functional.pad(codes, (0, length % 2))
            assert torch.equal(packed, (even[:, 0::2] | (even[:, 1::2] << 4)).to(torch.uint8))


def test_value_rotation_is_recorded_and_skipped_where_the_head_size_cannot_rotate(tmp_path):
    """A head size that is not a power of two stores values unrotated (said in the file) and still reads
    back within its steps; the rotated file of a power-of-two model says so too."""
    from safetensors import safe_open
    odd = prefill_chunk(tiny_lm("qwen2", head_dim=12), TEXT, prefix_ids=[tiny_tokenizer().bos_token_id])
    for cache, expected in ((odd, "none"), (prefill_chunk(tiny_lm("qwen2"), TEXT), "hadamard")):
        path = tmp_path / f"{expected}.safetensors"
        save_chunk_cache(cache, path, dtype="int4k-int3v")
        with safe_open(str(path), "pt") as f:
            assert f.metadata()["cag.value_rotation"] == expected
        loaded = load_chunk_cache(path)
        for original, got in zip(cache.values, loaded.values):
            span = original.float().amax((0, 2), keepdim=True) - original.float().amin((0, 2), keepdim=True)
            bound = span / 7 * 0.5 * (cache.meta.head_dim ** 0.5 if expected == "hadamard" else 1) + 1e-2 * span + 1e-3
            assert bool(((got.float() - original.float()).abs() <= bound).all())


def test_unknown_cache_dtype_is_refused(chunk, tmp_path):
    with pytest.raises(CagError, match="Unknown cache dtype 'int3'"):
        save_chunk_cache(chunk, tmp_path / "c.safetensors", dtype="int3")


def test_integer_parts_are_stacked_over_layers_and_earlier_per_layer_files_still_read(chunk, tmp_path):
    """An integer file holds one tensor per part (`k.q`, `v.min`, ...; (layers, ...)), not one per layer
    and part; a file written before, with parts named per layer (`k.0.q`, ...), reads back the same."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save as st_save

    from cag.kv.chunk_cache import FORMAT_VERSION
    from cag.kv.quantize import quantize
    from cag.kv.serde import _digest
    path = tmp_path / "stacked.safetensors"
    save_chunk_cache(chunk, path, dtype="int4")
    with safe_open(str(path), "pt") as f:
        assert sorted(f.keys()) == ["k.min", "k.q", "k.step", "offsets", "token_ids", "v.min", "v.q", "v.step"]
        assert f.get_tensor("k.q").shape[0] == chunk.meta.num_layers
    tensors = {"token_ids": chunk.token_ids.to(torch.int64), "offsets": chunk.offsets.to(torch.int64)}
    for layer, (k, v) in enumerate(zip(chunk.keys, chunk.values)):
        for name, x, per in ((f"k.{layer}", k, "channel"), (f"v.{layer}", v, "token")):
            tensors.update({f"{name}.{p}": t for p, t in quantize(x, 4, per, 128).items()})
    meta = {"cag.meta": json.dumps(chunk.meta.to_dict(), sort_keys=True), "cag.text": chunk.text,
            "cag.dtype": "int4", "cag.format_version": str(FORMAT_VERSION)}
    meta["cag.sha256"] = _digest(tensors, meta)
    (tmp_path / "per-layer.safetensors").write_bytes(st_save(tensors, metadata=meta))
    earlier, now = load_chunk_cache(tmp_path / "per-layer.safetensors"), load_chunk_cache(path)
    assert path.stat().st_size < (tmp_path / "per-layer.safetensors").stat().st_size
    for a, b in zip(earlier.keys + earlier.values, now.keys + now.values):
        assert torch.equal(a, b)


def test_a_file_records_its_groups_and_one_from_before_reads_with_the_groups_of_then(chunk, tmp_path):
    """int4k-int3v's groups changed (keys over 64 -> 128 tokens, values over 128 -> 64 channels): a
    file now says its groups, and one written before, which does not, reads with the old ones."""
    import dataclasses
    import json

    from safetensors import safe_open
    from safetensors.torch import save as st_save

    from cag.kv.chunk_cache import FORMAT_VERSION, ChunkCache
    from cag.kv.quantize import GROUPS_BEFORE_RECORDED, dequantize, hadamard, quantize
    from cag.kv.serde import _digest
    tokens, layers = 200, chunk.meta.num_layers  # wide enough that both groupings differ
    meta = dataclasses.replace(chunk.meta, head_dim=64)
    torch.manual_seed(0)
    wide = ChunkCache([torch.randn(2, tokens, 64).half() for _ in range(layers)],
                      [torch.randn(2, tokens, 64).half() for _ in range(layers)],
                      torch.arange(tokens), torch.zeros(tokens, 2, dtype=torch.int64), meta, chunk.text)
    path = tmp_path / "now.safetensors"
    save_chunk_cache(wide, path, dtype="int4k-int3v")
    with safe_open(str(path), "pt") as f:
        assert (f.metadata()["cag.key_group"], f.metadata()["cag.value_group"]) == ("128", "64")
    key_group, value_group = GROUPS_BEFORE_RECORDED["int4k-int3v"]
    rotation = hadamard(64)
    parts, expected = {}, []
    for k, v in zip(wide.keys, wide.values):
        for name, x, bits, per, group in (("k", k, 4, "channel", key_group),
                                          ("v", v.float() @ rotation, 3, "token", value_group)):
            q = quantize(x, bits, per, group)
            back = dequantize(q, x.shape, bits, per, group)
            expected.append(back if name == "k" else back @ rotation)
            for part, t in q.items():
                parts.setdefault(f"{name}.{part}", []).append(t)
    tensors = {"token_ids": wide.token_ids, "offsets": wide.offsets,
               **{name: torch.stack(stacked) for name, stacked in parts.items()}}
    header = {"cag.value_rotation": "hadamard", "cag.meta": json.dumps(meta.to_dict(), sort_keys=True),
              "cag.text": chunk.text, "cag.dtype": "int4k-int3v", "cag.format_version": str(FORMAT_VERSION)}
    header["cag.sha256"] = _digest(tensors, header)
    (tmp_path / "before.safetensors").write_bytes(st_save(tensors, metadata=header))
    before, now = load_chunk_cache(tmp_path / "before.safetensors"), load_chunk_cache(path)
    got = [t for k, v in zip(before.keys, before.values) for t in (k, v)]
    assert all(torch.equal(g, e.half()) for g, e in zip(got, expected))
    assert not torch.equal(now.values[0], before.values[0])  # the groups differ, so do the values
