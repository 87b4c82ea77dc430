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
