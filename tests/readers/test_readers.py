"""Reader adapters (cag.readers): files verified on load, bound to one generator and to what they
read, and switched on only inside `reading()`."""

import json

import pytest
import torch

from cag.errors import CagError
from cag.readers import attach, find_reader, load_reader, reading
from cag.testing import save_tiny_reader, tiny_lm


def logits(lm, ids=(5, 9, 17, 33, 2)):
    with torch.no_grad():
        return lm.model(input_ids=torch.tensor([list(ids)])).logits


def test_an_attached_reader_changes_nothing_until_switched_on(tmp_path):
    lm = tiny_lm("qwen2", seed=3)
    before = logits(lm)
    reader = load_reader(save_tiny_reader(lm, tmp_path / "r", scale=0.5))
    name = attach(lm, reader)
    assert attach(lm, reader) == name and lm.readers == {name: reader.fingerprint}  # injected once
    assert torch.equal(logits(lm), before)  # attached, switched off: the base model exactly
    with reading(lm, name):
        on = logits(lm)
    assert not torch.allclose(on, before, atol=1e-3)
    assert torch.equal(logits(lm), before)  # off again
    with pytest.raises(RuntimeError), reading(lm, name):
        raise RuntimeError("an error inside")
    assert torch.equal(logits(lm), before)  # off again after an error too
    with reading(lm, None):  # no reader: nothing changes
        assert torch.equal(logits(lm), before)


def test_a_zero_reader_is_the_base_model(tmp_path):
    lm = tiny_lm("llama", seed=1)
    before = logits(lm)
    name = attach(lm, load_reader(save_tiny_reader(lm, tmp_path / "r", scale=0.0)))
    with reading(lm, name):
        assert torch.allclose(logits(lm), before, atol=1e-6)


def test_a_reader_is_verified_and_bound_to_its_generator(tmp_path):
    lm = tiny_lm("qwen2", seed=3)
    path = save_tiny_reader(lm, tmp_path / "r", scale=0.5)
    record = json.loads(path.with_name("r.json").read_text())
    assert record["spec"]["generator_fingerprint"] == lm.fingerprint and record["spec"]["reads"] == "native"
    other = tiny_lm("qwen2", seed=4)  # the same architecture, other weights: another fingerprint
    with pytest.raises(CagError, match="was trained for tiny-qwen2 .*not for tiny-qwen2") as refused:
        attach(other, load_reader(path))
    assert "\n" not in str(refused.value)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CagError, match="do not match their record"):
        load_reader(path)


def test_readers_are_found_by_what_they_read(tmp_path, cag_home):
    lm = tiny_lm("qwen2", seed=3)
    folder = cag_home / "readers"
    save_tiny_reader(lm, folder / "native", "native", "native")
    save_tiny_reader(lm, folder / "translated", "f" * 64, "enc -> tiny-qwen2 (mot)")
    assert find_reader("native", lm.fingerprint, "native", lm.name).path.name == "native.safetensors"
    found = find_reader("f" * 64, lm.fingerprint, "enc -> tiny-qwen2 (mot)", lm.name)
    assert found.path.name == "translated.safetensors"
    other_translator = find_reader("e" * 64, lm.fingerprint, "enc -> tiny-qwen2 (ridge)", lm.name)
    assert other_translator.path is None and "was trained for" in other_translator.reason
    assert "cag train-reader --generator tiny-qwen2 --reads translated" in other_translator.reason
    other_version = find_reader("native", "0" * 64, "native", lm.name)
    assert other_version.path is None and "another version of the generator" in other_version.reason
    nobody = find_reader("native", "1" * 64, "native", "nobody")
    assert nobody.path is None and nobody.reason.startswith("no lora reader adapter for nobody reading native")
