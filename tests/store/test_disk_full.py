"""A disk that fills: ingest stops with one line naming the store and the bytes needed, leaves
nothing half-written and goes on where it stopped once there is room; the catalog's own writes
(SQLite's "database or disk is full") are the same line, not "damaged"; a translated ask whose
translations cannot be kept still answers, with a note."""

import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()
QUESTION = "How long can the European lobster grow?"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def handled(result) -> bool:
    return (result.exception is None or isinstance(result.exception, SystemExit)) and "Traceback" not in result.output


class FullDisk:
    """Path.write_bytes under `folder` with `free` bytes left: a write past them puts down what fits
    and fails with ENOSPC, as a real full disk does. `free = None`: room again."""

    def __init__(self, monkeypatch, folder: Path, free: int | None):
        self.folder, self.free, real = Path(folder), free, Path.write_bytes

        def write_bytes(path, data):
            if self.free is not None and Path(path).is_relative_to(self.folder):
                if len(data) > self.free:
                    real(path, data[:self.free])
                    self.free = 0
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                self.free -= len(data)
            return real(path, data)

        monkeypatch.setattr(Path, "write_bytes", write_bytes)


def ingest(store, corpus, tiny_models, *extra):
    return invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32, *extra)


def leftovers(store) -> list:
    return [p for p in Path(store).rglob(".tmp-*")]


def every_cache_verifies(store) -> int:
    from cag.kv.serde import load_chunk_cache
    files = sorted(Path(store).rglob("*.safetensors"))
    for path in files:
        load_chunk_cache(path)  # raises on a partial file
    return len(files)


def one_line(result) -> str:
    assert result.exit_code == 1 and handled(result), result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_a_disk_that_fills_during_ingest_is_one_line_and_ingest_resumes(tiny_models, corpus, tmp_path, monkeypatch):
    store = tmp_path / "store"
    disk = FullDisk(monkeypatch, tmp_path, 60_000)  # room for a few chunk caches, not all
    line = one_line(ingest(store, corpus, tiny_models))
    assert f"The disk holding store {store} is full" in line and "bytes needed to write" in line, line
    assert "run the same ingest again" in line
    assert not leftovers(store)
    written = every_cache_verifies(store)
    assert written > 0
    disk.free = None  # room again
    again = ingest(store, corpus, tiny_models)
    assert again.exit_code == 0, again.output
    assert every_cache_verifies(store) > written
    listed = invoke("store", "list", "--store", store)
    assert len(listed.output.strip().splitlines()) == 4  # every readable file
    assert invoke("store", "check", "--store", store).exit_code == 0


def test_a_catalog_that_cannot_grow_is_a_full_disk_not_damage(tiny_models, corpus, tmp_path, monkeypatch):
    from cag.store.catalog import Catalog

    store = tmp_path / "store"
    (tmp_path / "first").mkdir()
    (tmp_path / "first" / "a.txt").write_text("Paris is the capital of France. " * 3)
    assert ingest(store, tmp_path / "first", tiny_models).exit_code == 0
    real_init = Catalog.__init__

    def full_catalog(self, path):  # SQLite's own SQLITE_FULL: the file may not grow past its size now
        real_init(self, path)
        pages = self.conn.rows("PRAGMA page_count")[0][0]
        self.conn.execute(f"PRAGMA max_page_count = {pages}")

    monkeypatch.setattr(Catalog, "__init__", full_catalog)
    line = one_line(ingest(store, corpus, tiny_models))
    assert "is full" in line and "catalog.sqlite" in line and "damaged" not in line, line
    monkeypatch.setattr(Catalog, "__init__", real_init)
    conn = sqlite3.connect(store / "catalog.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    again = ingest(store, corpus, tiny_models)
    assert again.exit_code == 0 and "4 ingested" in again.output, again.output
    assert invoke("store", "check", "--store", store).exit_code == 0


@pytest.fixture
def translated_store(tiny_models, corpus, tmp_path, cag_home):
    """A store of the corpus and a tiny MoT translator (random weights) installed in the cag home."""
    from cag.models import load_model
    from mot.checkpoint import save_translator
    from cag.translations import TranslationId
    from mot.translator import Translator, make_spec

    store = tmp_path / "store"
    assert ingest(store, corpus, tiny_models).exit_code == 0
    encoder, generator = load_model(tiny_models["encoder"]), load_model(tiny_models["generator"])
    torch.manual_seed(0)
    save_translator(Translator(make_spec("mot", encoder, generator)),
                    cag_home / "translators" / TranslationId(encoder.name, generator.name, "mot").file_stem)
    return store


def translated_ask(store, tiny_models):
    return invoke("ask", QUESTION, "--store", store, "--model", tiny_models["generator"], "--mode", "translated",
                  "--json", "--max-new-tokens", 3, "--top-k", 2)


def translations(store) -> list:
    from cag.store import Store
    opened = Store.open(store)
    try:
        return [f for s in opened.spaces() if s.role == "translated" for f in opened.space_files(s)]
    finally:
        opened.close()


def test_a_translated_ask_on_a_full_disk_answers_with_a_note(translated_store, tiny_models, monkeypatch):
    disk = FullDisk(monkeypatch, translated_store, 0)
    answered = translated_ask(translated_store, tiny_models)
    assert answered.exit_code == 0 and handled(answered), answered.output
    result = json.loads(answered.stdout.strip().splitlines()[-1])
    assert result["mode"] == "translated" and result["answer"]
    note = " ".join(result["notes"])
    assert f"The disk holding store {translated_store} is full" in note and "without keeping the translations" in note
    assert not translations(translated_store) and not leftovers(translated_store)
    disk.free = None
    again = json.loads(translated_ask(translated_store, tiny_models).stdout.strip().splitlines()[-1])
    assert again["answer"] == result["answer"] and not again["notes"]
    assert translations(translated_store)  # kept now
