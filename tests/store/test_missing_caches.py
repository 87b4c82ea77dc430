"""Which caches a store should hold, and what happens when one is gone: `cag store check` expects a
chunk's cache only in the spaces its file was ingested for; a missing one is named by `ask`, by
`check`, and every command the store prints as the fix does fix it when run as printed."""

import re
import shlex

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()
QUESTION = "How long can the European lobster grow?"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def store(tiny_models, corpus, tmp_path):
    path = tmp_path / "store"
    result = invoke("ingest", corpus, "--store", path, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                    "--also-for", tiny_models["generator"])
    assert result.exit_code == 0, result.output
    return path


def test_a_space_a_file_was_never_ingested_for_is_not_missing(store, tiny_models, corpus):
    (corpus / "comet.txt").write_text("The Zorblax comet returns every 77 years. " * 3)
    plain = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"])  # no --also-for
    assert plain.exit_code == 0 and "1 ingested" in plain.output, plain.output
    found = invoke("store", "check", "--store", store)
    assert found.exit_code == 0 and "No problems found" in found.output, found.output
    # an edited file ingested without --also-for: its new chunks were not asked for either
    (corpus / "mountain.txt").write_text((corpus / "mountain.txt").read_text() + " It is in Colorado.")
    assert invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"]).exit_code == 0
    assert invoke("store", "check", "--store", store).exit_code == 0
    # asked for again: every file is expected in the generator's space, and has it
    again = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"],
                   "--also-for", tiny_models["generator"])
    assert again.exit_code == 0 and "2 ingested" in again.output, again.output
    assert invoke("store", "check", "--store", store).exit_code == 0


def test_a_file_ingested_before_spaces_were_recorded_is_expected_where_it_has_caches(store, tiny_models, corpus):
    import sqlite3

    from cag.store import Store

    (corpus / "comet.txt").write_text("The Zorblax comet returns every 77 years. " * 3)
    assert invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"]).exit_code == 0
    conn = sqlite3.connect(store / "catalog.sqlite")
    conn.execute("DELETE FROM file_spaces")  # as a catalog of an earlier cag
    conn.commit()
    conn.close()
    assert invoke("store", "check", "--store", store).exit_code == 0  # comet.txt has no native cache at all
    opened = Store.open(store)
    try:
        native = next(s for s in opened.spaces() if s.role == "native")
        lobster = next(c for c in opened.catalog.all_chunks() if c.doc_path.endswith("lobster.md"))
        opened.cache_path(native, lobster.text_sha256).unlink()
    finally:
        opened.close()
    found = invoke("store", "check", "--store", store)
    assert found.exit_code == 1 and "lobster.md have no native cache" in found.output, found.output
    assert "comet.txt" not in found.output


def hint(output: str, starts: str = "cag ingest") -> list[str]:
    """The command a message names as the fix (the first `...` quoting `starts`), as CLI arguments."""
    commands = [c for c in re.findall(r"`([^`]+)`", output) if c.startswith(starts)]
    assert commands, f"no `{starts} ...` hint in: {output}"
    return shlex.split(commands[0])[1:]


def follow(output: str, starts: str = "cag ingest"):
    """Run the command a message names, exactly as printed (no option added)."""
    result = invoke(*hint(output, starts))
    assert result.exit_code == 0, result.output
    return result


def corrupt(path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))


def cache_of(store, role: str, doc: str):
    """The cache file of `doc`'s first chunk in the store's `role` space."""
    from cag.store import Store

    opened = Store.open(store)
    try:
        space = next(s for s in opened.spaces() if s.role == role)
        chunk = next(c for c in opened.catalog.all_chunks() if c.doc_path.endswith(doc))
        return opened.cache_path(space, chunk.text_sha256)
    finally:
        opened.close()


def ask(store, tiny_models, *extra, top_k=50):
    return invoke("ask", QUESTION, "--store", store, "--model", tiny_models["generator"], "--json",
                  "--max-new-tokens", 2, "--top-k", top_k, *extra)


def test_the_hint_for_a_corrupt_native_cache_repairs_it_when_followed(store, tiny_models):
    path = cache_of(store, "native", "lobster.md")
    corrupt(path)
    refused = ask(store, tiny_models, "--mode", "native")
    assert refused.exit_code == 1 and "It was removed" in refused.output, refused.output
    assert f"--also-for {tiny_models['generator']}" in refused.output
    follow(refused.output)
    assert path.is_file()
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0
    assert invoke("store", "check", "--store", store).exit_code == 0


def test_the_hint_for_a_corrupt_encoder_cache_repairs_it_when_followed(store, tiny_models):
    from cag.errors import CagError
    from cag.store import Store

    path = cache_of(store, "encoder", "lobster.md")
    corrupt(path)
    opened = Store.open(store)  # what a translated mode reads
    try:
        space = next(s for s in opened.spaces() if s.role == "encoder")
        chunk = next(c for c in opened.catalog.all_chunks() if c.doc_path.endswith("lobster.md"))
        with pytest.raises(CagError) as refused:
            opened.read_cache(space, chunk)
    finally:
        opened.close()
    assert "--also-for" not in str(refused.value)
    follow(str(refused.value))
    assert path.is_file() and invoke("store", "check", "--store", store).exit_code == 0


def test_the_hint_for_a_damaged_chunk_row_repairs_it_when_followed(store, tiny_models):
    import sqlite3

    conn = sqlite3.connect(store / "catalog.sqlite")
    conn.execute("UPDATE chunks SET char_end = char_end + 1 WHERE id = (SELECT c.id FROM chunks c JOIN documents d "
                 "ON d.id = c.doc_id WHERE d.path LIKE '%lobster.md' LIMIT 1)")
    conn.commit()
    conn.close()
    refused = ask(store, tiny_models, "--mode", "native")
    assert refused.exit_code == 1 and "is damaged" in refused.output, refused.output
    follow(refused.output)
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0
    assert invoke("store", "check", "--store", store).exit_code == 0


def test_the_hint_for_pruned_native_caches_makes_them_when_followed(store, tiny_models):
    assert invoke("store", "prune", "--role", "native", "--store", store).exit_code == 0
    refused = ask(store, tiny_models, "--mode", "native")
    assert refused.exit_code == 1 and "No native caches" in refused.output, refused.output
    follow(refused.output)
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0


def test_the_hint_for_a_document_gone_from_disk_clears_it_when_followed(store, corpus):
    corrupt(cache_of(store, "native", "lobster.md"))
    (corpus / "lobster.md").unlink()
    repaired = invoke("store", "check", "--repair", "--store", store)
    assert repaired.exit_code == 1 and "lobster.md is no longer on disk" in repaired.output, repaired.output
    follow(repaired.output, "cag store remove")
    assert invoke("store", "check", "--store", store).exit_code == 0


def test_auto_names_a_deleted_native_cache_and_its_fix(store, tiny_models):
    import json

    cache_of(store, "native", "lobster.md").unlink()
    answered = ask(store, tiny_models)  # --mode auto, every chunk retrieved
    assert answered.exit_code == 0, answered.output
    result = json.loads(answered.stdout.strip().splitlines()[-1])
    assert result["mode"] != "native"
    note = " ".join(result["notes"])
    assert "No native caches for" in note and "for 1 of the" in note, note
    assert "lobster.md" in " ".join(hint(note)) and "--also-for" in hint(note)
    found = invoke("store", "check", "--store", store)
    assert found.exit_code == 1 and "lobster.md have no native cache" in found.output
    follow(note)
    assert json.loads(ask(store, tiny_models).stdout.strip().splitlines()[-1])["mode"] == "native"


def test_repair_restores_a_deleted_native_cache(store, tiny_models):
    import json

    path = cache_of(store, "native", "lobster.md")
    path.unlink()
    repaired = invoke("store", "check", "--repair", "--store", store)
    assert repaired.exit_code == 0 and "No problems found" in repaired.output, repaired.output
    assert path.is_file()
    assert json.loads(ask(store, tiny_models).stdout.strip().splitlines()[-1])["mode"] == "native"
