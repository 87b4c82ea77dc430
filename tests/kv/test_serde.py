"""Chunk cache files: exact per dtype, metadata inside, damage detected and named."""

import pytest
import torch

from cag.errors import CagError, CorruptCacheError
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.serde import STORAGE_DTYPES, load_chunk_cache, save_chunk_cache
from cag.testing import tiny_lm, tiny_tokenizer

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


@pytest.mark.parametrize("dtype,bits", [("int8", 8), ("int4", 4)])
def test_integer_storage_round_trips_within_its_steps_and_is_smaller(chunk, tmp_path, dtype, bits):
    """int8 / int4 (KIVI-style): every key within half a step of its channel group's range, every
    value within half a step of its token group's; at a real model's shapes (2 heads x 64, 256
    tokens) the codes and ranges take a half / a bit over a quarter of fp16's bytes (the ranges cost
    4 bytes per 128 values)."""
    from cag.kv.quantize import GROUP, quantize
    path = tmp_path / f"c-{dtype}.safetensors"
    written = save_chunk_cache(chunk, path, dtype=dtype)
    loaded = load_chunk_cache(path)
    assert loaded.meta == chunk.meta and torch.equal(loaded.token_ids, chunk.token_ids) and loaded.text == TEXT
    for original, got, axes in [(k, g, (1,)) for k, g in zip(chunk.keys, loaded.keys)] + \
                               [(v, g, (0, 2)) for v, g in zip(chunk.values, loaded.values)]:
        # keys: one range per channel over the tokens; values: one per token over all heads' channels
        assert got.dtype == torch.float16 and got.shape == original.shape
        span = original.float().amax(axes, keepdim=True) - original.float().amin(axes, keepdim=True)
        step = span / (2 ** bits - 1)  # the group's step (the test chunk fits one group of GROUP)
        assert all(original.shape[a] for a in axes) and original.shape[1] <= GROUP
        assert bool(((got.float() - original.float()).abs() <= step * 0.5 + 1e-2 * span + 1e-3).all())
    x = torch.randn(2, 256, 64)
    stored = sum(t.numel() * t.element_size() for per in ("channel", "token")
                 for t in quantize(x, dtype, per).values())
    ratio = stored / (2 * x.numel() * 2)  # two tensors (K and V) in fp16
    assert ratio == pytest.approx(0.5 + 1 / 64 if bits == 8 else 0.25 + 1 / 64, abs=1e-3)


def test_unknown_cache_dtype_is_refused(chunk, tmp_path):
    with pytest.raises(CagError, match="Unknown cache dtype 'int3'"):
        save_chunk_cache(chunk, tmp_path / "c.safetensors", dtype="int3")
