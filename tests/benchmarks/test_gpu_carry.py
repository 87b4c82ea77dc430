"""The GPU run's transfer: the slim working tree (slim.py: the run's files alone, as ordinary files,
within one call's 64 MiB), and what else it needs in chunks: pack.py cuts items into pieces across
chunk folders, stage.py joins each item once all its pieces have arrived and refuses one whose bytes
changed."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "gpu" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stage(chunk: Path, into: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "stage.py"), str(chunk),
                           "--into", str(into)], capture_output=True, text=True)


@pytest.fixture()
def packed(tmp_path):
    items = {"a.bin": bytes(range(256)) * 40, "b.tar": b"x" * 5000, "c.gguf": bytes(reversed(range(256))) * 3}
    for name, data in items.items():
        (tmp_path / name).write_bytes(data)
    manifest = _module("pack").pack([(n, tmp_path / n) for n in items], tmp_path / "carry", chunk_bytes=4096)
    return items, manifest, tmp_path / "carry"


def test_items_are_cut_into_chunks_of_the_given_size(packed):
    items, manifest, carry = packed
    total = sum(len(data) for data in items.values())
    assert manifest["chunks"] == -(-total // 4096)  # every chunk but the last is full
    for folder in sorted(carry.iterdir())[:-1]:
        assert sum(p.stat().st_size for p in folder.iterdir() if p.name != "manifest.json") == 4096
    assert json.loads((carry / "01" / "manifest.json").read_text()) == manifest


def test_stage_joins_each_item_once_its_pieces_are_all_there(packed, tmp_path):
    items, manifest, carry = packed
    into = tmp_path / "staged"
    first = _stage(carry / "01", into)
    assert first.returncode == 0 and not (into / "files" / "a.bin").exists()  # a.bin spans two chunks
    for folder in sorted(carry.iterdir())[1:]:
        assert _stage(folder, into).returncode == 0
    for name, data in items.items():
        assert (into / "files" / name).read_bytes() == data
    assert not any((into / "pieces").iterdir())  # pieces are removed once joined


def test_stage_refuses_an_item_whose_bytes_changed(packed, tmp_path):
    items, manifest, carry = packed
    first = manifest["items"][1]["pieces"][0]  # b.tar's first piece
    piece = carry / f"{first['chunk']:02d}" / first["name"]
    piece.write_bytes(b"y" + piece.read_bytes()[1:])
    into = tmp_path / "staged"
    results = [_stage(folder, into) for folder in sorted(carry.iterdir())]
    assert any(r.returncode != 0 and "sha256" in r.stderr for r in results)
    assert not (into / "files" / "b.tar").exists()
    assert (into / "files" / "a.bin").read_bytes() == items["a.bin"]


RUN_FILES = ("translators/smollm2-135m__qwen2.5-coder-0.5b__mot.safetensors", "data/squad_v1.1/dev.jsonl",
             "data/corpus/wikitext2/train_raw_part.jsonl", "data/corpus/wikitext2/valid.jsonl",
             "samples/corpus/homarus_gammarus.md", "benchmarks/gpu/run.py", "benchmarks/serve_process.py",
             "cag/ask.py", "mot/modes.py", "eval/runner.py", "cli/main.py", "indexes/factory.py",
             "tests/tiny_models.py", "pyproject.toml", "README.md")


def test_the_slim_tree_keeps_what_the_run_reads_and_fits_one_call():
    slim = _module("slim")
    parts = slim.selection("smollm2-135m", "qwen2.5-coder-0.5b", code_only=False)
    tracked = slim.tracked_sizes()
    kept = {path for path in tracked if slim.part_of(path, parts)}
    assert set(RUN_FILES) <= kept
    tiny = {"tests/__init__.py", "tests/tiny_models.py"}  # the smoke run's models built in code, no other test
    assert not any(p.startswith(("records/", "tests/", "docs/", "experiments/")) for p in kept - tiny)
    assert {p for p in kept if p.startswith("translators/")} == {
        "translators/smollm2-135m__qwen2.5-coder-0.5b__mot.json", "translators/smollm2-135m__qwen2.5-coder-0.5b__mot.safetensors"}
    sent = slim.travelling(parts)
    assert sum(v for k, v in sent.items() if k != "left out") <= slim.LIMIT
    code = slim.selection("smollm2-135m", "qwen2.5-coder-0.5b", code_only=True)
    assert sum(tracked[p] for p in tracked if slim.part_of(p, code)) < 4 * 10**6  # room for a 60 MB chunk


def test_the_slim_tree_is_what_a_sparse_checkout_leaves(tmp_path):
    """slim.apply on a clone of this repository: the working tree then holds the selected files
    alone, as ordinary files (what a call sends)."""
    slim = _module("slim")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    parts = slim.selection("smollm2-135m", "qwen2.5-coder-0.5b", code_only=False)
    slim.apply(parts, clone)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q"], check=True)
    on_disk = {str(p.relative_to(clone)) for p in clone.rglob("*") if p.is_file() and ".git" not in p.relative_to(clone).parts}
    assert on_disk == {p for p in slim.tracked_sizes(clone) if slim.part_of(p, parts)}
    assert set(RUN_FILES) <= on_disk
    assert (clone / RUN_FILES[0]).stat().st_size == slim.tracked_sizes(clone)[RUN_FILES[0]]
