"""A chunk row is sealed to its place: its document (file and locator), its index and how many
chunks that document has. A row moved to another document is damaged, the document it left counts
as changed, and nothing is lost on the next ingest. Catalogs written with the first row digest
(which did not cover the document) are read the old way and upgraded only by `--repair`."""

import sqlite3

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def store(tiny_models, corpus, tmp_path):
    path = tmp_path / "store"
    result = invoke("ingest", corpus, "--store", path, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32)
    assert result.exit_code == 0, result.output
    return path


def sql(store, statement, params=()):
    conn = sqlite3.connect(store / "catalog.sqlite")
    try:
        rows = conn.execute(statement, params).fetchall()
        conn.commit()
        return rows
    finally:
        conn.close()


def doc_id(store, name):
    return sql(store, "SELECT id FROM documents WHERE path LIKE ?", (f"%{name}",))[0][0]


def move_last_lobster_chunk_to_planet(store):
    """What a careless hand (or a bad merge of two catalogs) does: the row keeps every byte it had,
    its digest included; only its document changes. The last chunk: no gap shows in lobster.md
    (planet.html has fewer chunks, so the moved row's index is free there)."""
    lobster, planet = doc_id(store, "lobster.md"), doc_id(store, "planet.html")
    chunk, idx, text = sql(store, "SELECT id, idx, text FROM chunks WHERE doc_id = ? ORDER BY idx DESC LIMIT 1",
                           (lobster,))[0]
    assert idx > max(r[0] for r in sql(store, "SELECT idx FROM chunks WHERE doc_id = ?", (planet,)))
    sql(store, "UPDATE chunks SET doc_id = ? WHERE id = ?", (planet, chunk))
    return text


def lobster_texts(store):
    return [r[0] for r in sql(store, "SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                                     "WHERE d.path LIKE '%lobster.md' ORDER BY c.idx")]


def test_a_row_moved_to_another_document_is_damaged_and_nothing_is_lost(store, tiny_models, corpus):
    before = lobster_texts(store)
    moved = move_last_lobster_chunk_to_planet(store)
    found = invoke("store", "check", "--store", store)
    assert found.exit_code == 1, found.output
    assert "planet.html is damaged" in found.output  # the moved row, where it sits now
    assert "lobster.md has" in found.output and "a row was deleted or moved" in found.output  # the one it left
    asked = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                   tiny_models["generator"], "--mode", "direct", "--top-k", 50, "--max-new-tokens", 2)
    assert asked.exit_code == 1 and "planet.html" in asked.output and "is damaged" in asked.output
    # a normal edit of the other file and a normal ingest: both files count as changed
    planet = corpus / "sub" / "planet.html"
    planet.write_text(planet.read_text().replace("in 1996", "in 1996 by Butler"))
    again = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32)
    assert again.exit_code == 0 and "2 ingested" in again.output, again.output
    assert lobster_texts(store) == before and moved in before
    assert invoke("store", "check", "--store", store).exit_code == 0


def test_repair_puts_a_moved_row_back(store):
    before = lobster_texts(store)
    move_last_lobster_chunk_to_planet(store)
    repaired = invoke("store", "check", "--repair", "--store", store)
    assert repaired.exit_code == 0 and "No problems found" in repaired.output, repaired.output
    assert lobster_texts(store) == before


def test_rows_with_the_first_digest_are_read_the_old_way_and_upgraded_by_repair(store, tiny_models):
    from cag.store.row_digest import row_digest_v1

    rows = sql(store, "SELECT id, idx, char_start, char_end, n_tokens, text_sha256, embedding FROM chunks")
    for chunk, *fields in rows:  # the catalog as the first row digest wrote it
        sql(store, "UPDATE chunks SET chunk_sha256 = ?, digest_version = 1 WHERE id = ?", (row_digest_v1(*fields), chunk))
    sql(store, "UPDATE documents SET n_chunks = NULL")
    answer = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                    tiny_models["generator"], "--mode", "direct", "--top-k", 50, "--max-new-tokens", 2)
    assert answer.exit_code == 0, answer.output
    assert sql(store, "SELECT COUNT(*) FROM chunks WHERE digest_version = 1")[0][0] == len(rows)  # not rewritten
    found = invoke("store", "check", "--store", store)
    assert found.exit_code == 0 and f"{len(rows)} chunk rows carry the first row digest" in found.output, found.output
    repaired = invoke("store", "check", "--repair", "--store", store)
    assert repaired.exit_code == 0 and f"sealed {len(rows)} chunk rows" in repaired.output, repaired.output
    assert sql(store, "SELECT COUNT(*) FROM chunks WHERE digest_version = 1")[0][0] == 0
    move_last_lobster_chunk_to_planet(store)
    assert invoke("store", "check", "--store", store).exit_code == 1  # sealed: a move shows now


def test_a_catalog_from_before_the_place_columns_opens_and_reads(store, tiny_models):
    rows = sql(store, "SELECT id, idx, char_start, char_end, n_tokens, text_sha256, embedding FROM chunks")
    from cag.store.row_digest import row_digest_v1
    for chunk, *fields in rows:
        sql(store, "UPDATE chunks SET chunk_sha256 = ? WHERE id = ?", (row_digest_v1(*fields), chunk))
    sql(store, "ALTER TABLE chunks DROP COLUMN digest_version")
    sql(store, "ALTER TABLE documents DROP COLUMN n_chunks")
    answer = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                    tiny_models["generator"], "--mode", "direct", "--max-new-tokens", 2)
    assert answer.exit_code == 0, answer.output
    assert sql(store, "SELECT COUNT(*) FROM chunks WHERE digest_version = 1")[0][0] == len(rows)
