"""A store damaged the ways a disk, a crash or a careless hand damage it: every case gives no wrong
answer, no traceback, touches no file outside the store, and `cag store check` names the damage;
`--repair` (or re-ingesting) brings the store back."""

import json
import sqlite3

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()
QUESTION = "How long can the European lobster grow?"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def handled(result) -> bool:
    """The command ended through cag's own paths (a one-line error or a clean exit), no traceback."""
    return (result.exception is None or isinstance(result.exception, SystemExit)) and "Traceback" not in result.output


@pytest.fixture
def store(tiny_models, corpus, tmp_path):
    path = tmp_path / "store"
    result = invoke("ingest", corpus, "--store", path, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                    "--also-for", tiny_models["generator"])
    assert result.exit_code == 0, result.output
    return path


def ask(store, tiny_models, *extra, top_k=50):
    """Every chunk retrieved by default (--top-k past the store's size), so a damaged one is."""
    return invoke("ask", QUESTION, "--store", store, "--model", tiny_models["generator"], "--json",
                  "--max-new-tokens", 3, "--top-k", top_k, *extra)


def check(store, *extra):
    result = invoke("store", "check", "--store", store, *extra)
    assert handled(result), result.output
    return result


def lobster_row(store):
    conn = sqlite3.connect(store / "catalog.sqlite")
    row = conn.execute("SELECT c.text, c.embedding FROM chunks c JOIN documents d ON d.id = c.doc_id "
                       "WHERE d.path LIKE '%lobster.md' AND c.text LIKE '%60 cm%' ORDER BY c.idx").fetchone()
    conn.close()
    return row


def overwrite_in_file(path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1, "the bytes to damage must be found exactly once"
    path.write_bytes(data.replace(old, new))


def test_changed_text_in_the_catalog_is_never_answered_from_and_ingest_repairs_it(store, tiny_models, corpus):
    text, _ = lobster_row(store)
    assert "60 cm" in text
    overwrite_in_file(store / "catalog.sqlite", text.encode(), text.replace("60 cm", "97 cm", 1).encode())
    answer = ask(store, tiny_models, "--mode", "direct")
    assert answer.exit_code == 1 and handled(answer)
    assert "lobster.md" in answer.output and "is damaged" in answer.output and "cag ingest" in answer.output
    found = check(store)
    assert found.exit_code == 1 and "chunk: chunk " in found.output and "lobster.md is damaged" in found.output
    assert "does not match its sha256" in found.output
    again = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32)
    assert again.exit_code == 0 and "1 ingested" in again.output, again.output  # the damaged file counts as changed
    assert "97 cm" not in lobster_row(store)[0]
    assert ask(store, tiny_models, "--mode", "direct").exit_code == 0
    assert check(store).exit_code == 0


def test_changed_embedding_is_caught_and_left_out_of_a_rebuilt_index(store, tiny_models):
    _, embedding = lobster_row(store)
    middle = len(embedding) // 2
    overwrite_in_file(store / "catalog.sqlite", embedding[middle:middle + 32], b"\x7f" * 32)
    answer = ask(store, tiny_models, "--mode", "native")
    assert answer.exit_code == 1 and handled(answer)  # the (intact) index still holds the damaged row
    assert "lobster.md" in answer.output and "is damaged" in answer.output
    found = check(store)
    assert found.exit_code == 1 and "embedding, span or digest" in found.output
    repaired = check(store, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "repaired: ingested 1 file(s) again" in repaired.output and "No problems found" in repaired.output
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0


def test_damaged_index_is_rebuilt_not_searched(store, tiny_models):
    index = store / "index.faiss"
    data = bytearray(index.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 32] = b"\x7f" * 32
    index.write_bytes(bytes(data))
    found = check(store)
    assert found.exit_code == 1 and "index: the FAISS index does not match the digest" in found.output
    answer = ask(store, tiny_models, "--mode", "native")
    assert answer.exit_code == 0, answer.output
    scores = [s["score"] for s in json.loads(answer.stdout.strip().splitlines()[-1])["sources"]]
    assert all(-1.01 <= s <= 1.01 for s in scores)  # cosine similarities of unit vectors, none damaged
    assert check(store).exit_code == 0  # the read rebuilt it


def test_malformed_catalog_page_is_one_line_and_repair_rebuilds_it(store, tiny_models, corpus):
    catalog = store / "catalog.sqlite"
    data = bytearray(catalog.read_bytes())
    data[4096:4096 + 64] = b"\xff" * 64
    catalog.write_bytes(bytes(data))
    for result in (ask(store, tiny_models, "--mode", "direct"),
                   invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32)):
        assert result.exit_code == 1 and handled(result), result.output
        assert "catalog" in result.output and "is damaged" in result.output and "--repair" in result.output
        assert len(result.output.strip().splitlines()) == 1
    found = check(store)
    assert found.exit_code == 1 and "catalog:" in found.output
    repaired = check(store, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "moved the damaged catalog" in repaired.output
    assert list(store.glob("catalog.sqlite.damaged-*"))  # kept aside, inside the store
    listed = invoke("store", "list", "--store", store)
    assert listed.exit_code == 0 and len(listed.output.strip().splitlines()) == 4  # the 4 readable files
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0


def test_deletes_never_leave_the_store(store, tiny_models, corpus, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    keep = [outside / ("a" * 64 + ".safetensors"), outside / "notes.txt"]
    for path in keep:
        path.write_text("not the store's")
    space = next(p.parent for p in (store / "caches").glob("*/model.json")
                 if json.loads(p.read_text())["role"] == "native")
    (space / "zz").symlink_to(outside)  # a symlinked folder where cache shards live
    (space / "stray.bin").write_text("someone else's file")
    found = check(store)
    assert found.exit_code == 1 and "is a symlink: left alone" in found.output
    assert "stray.bin is not a cag cache file" in found.output
    assert invoke("store", "remove", corpus / "mountain.txt", "--store", store).exit_code == 0
    assert invoke("store", "prune", "--role", "native", "--store", store).exit_code == 0
    assert check(store, "--repair").exit_code == 1  # foreign entries are reported, never touched
    assert all(path.read_text() == "not the store's" for path in keep)
    assert (space / "stray.bin").is_file() and (space / "zz").is_symlink()


def test_caches_on_another_disk_through_a_symlinked_caches_folder(store, tiny_models, corpus, tmp_path):
    """A user moves caches/ to a bigger disk and leaves a link: every mode reads through it, check and
    repair walk it, ingest writes through it; links inside it are still never followed."""
    import shutil

    other_disk = tmp_path / "big_disk"
    other_disk.mkdir()
    shutil.move(store / "caches", other_disk / "caches")
    (store / "caches").symlink_to(other_disk / "caches")
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0
    found = check(store)
    assert found.exit_code == 0 and "No problems found" in found.output, found.output
    files = sorted((other_disk / "caches").rglob("*.safetensors"))
    assert f"{len(files)} cache files checked" in found.output
    info = json.loads(invoke("store", "info", "--store", store, "--json").output)
    assert info["bytes_on_disk"] > sum(f.stat().st_size for f in files)
    data = bytearray(files[0].read_bytes())
    data[-3] ^= 0xFF
    files[0].write_bytes(bytes(data))
    (other_disk / "caches" / "notes.txt").write_text("someone else's file")
    found = check(store)
    assert found.exit_code == 1 and "cache: " in found.output and "notes.txt is not a cag cache file" in found.output
    assert check(store, "--repair").exit_code == 1  # the foreign file stays, reported
    assert (other_disk / "caches" / "notes.txt").is_file()
    (other_disk / "caches" / "notes.txt").unlink()
    assert check(store).exit_code == 0
    (corpus / "comet.txt").write_text("The Zorblax comet returns every 77 years. " * 3)
    again = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                   "--also-for", tiny_models["generator"])
    assert again.exit_code == 0 and "1 ingested" in again.output, again.output
    assert (store / "caches").is_symlink() and len(list((other_disk / "caches").rglob("*.safetensors"))) > len(files)
    assert check(store).exit_code == 0


def test_a_caches_link_to_nowhere_is_one_line_everywhere(store, tiny_models, corpus, tmp_path):
    import shutil

    shutil.rmtree(store / "caches")
    (store / "caches").symlink_to(tmp_path / "unmounted" / "caches")
    for args in (["ask", QUESTION, "--model", tiny_models["generator"], "--mode", "native"],
                 ["ingest", corpus, "--encoder", tiny_models["encoder"]], ["store", "check"],
                 ["store", "check", "--repair"], ["store", "info"]):
        result = invoke(*args, "--store", store)
        assert result.exit_code == 1 and handled(result), (args, result.output)
        assert len(result.output.strip().splitlines()) == 1 and "is a link to" in result.output, (args, result.output)
        assert "which is not a folder" in result.output


def test_a_regular_file_as_store_is_refused(tiny_models, corpus, tmp_path):
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("hello")
    for args in (["ingest", corpus, "--store", not_a_folder, "--encoder", tiny_models["encoder"]],
                 ["ask", "Who?", "--store", not_a_folder], ["store", "check", "--store", not_a_folder]):
        result = invoke(*args)
        assert result.exit_code == 1 and handled(result), result.output
        assert "is a file, not a store folder" in result.output
    assert not_a_folder.read_text() == "hello"


def test_a_removed_cache_names_its_document_and_the_store(store, tiny_models):
    caches = sorted(p for p in (store / "caches").rglob("*.safetensors"))
    for path in caches:  # damage the generator's caches: whichever chunk is retrieved is damaged
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))
    first = ask(store, tiny_models, "--mode", "native", top_k=1)
    assert first.exit_code == 1 and f"--store {store}" in first.output and "It was removed" in first.output
    second = ask(store, tiny_models, "--mode", "native", top_k=1)
    assert second.exit_code == 1 and "No native caches" in second.output
    assert "for 1 of the 1 retrieved chunks" in second.output and f"--store {store}" in second.output
    found = check(store)
    assert "missing: " in found.output and "have no native cache" in found.output
    repaired = check(store, "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0


def test_a_store_below_a_regular_file_is_one_line_in_every_command(tiny_models, corpus, tmp_path):
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("hello")
    below = not_a_folder / "store"
    for args in (["ingest", corpus, "--encoder", tiny_models["encoder"]], ["ask", "Who?"], ["store", "check"],
                 ["store", "check", "--repair"], ["store", "info"], ["store", "list"], ["store", "prune"],
                 ["store", "remove", corpus], ["serve", "--no-warm-up"]):
        result = invoke(*args, "--store", below)
        assert result.exit_code == 1 and handled(result), (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, (args, result.output)
        assert f"{not_a_folder} is a file, not a folder" in result.output, (args, result.output)
    assert not_a_folder.read_text() == "hello"


def test_a_file_name_with_a_newline_is_listed_on_one_line(tiny_models, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "two\nlines.txt").write_text("Mount Elbert is the highest summit of the Rocky Mountains. " * 3)
    store = tmp_path / "store"
    assert invoke("ingest", docs, "--store", store, "--encoder", tiny_models["encoder"]).exit_code == 0
    listed = invoke("store", "list", "--store", store)
    assert listed.exit_code == 0 and listed.output.count("\n") == 1 and "two\\nlines.txt" in listed.output


def test_a_store_from_before_row_digests_is_upgraded_in_place(store, tiny_models):
    conn = sqlite3.connect(store / "catalog.sqlite")
    conn.execute("ALTER TABLE chunks DROP COLUMN chunk_sha256")
    conn.commit()
    conn.close()
    assert ask(store, tiny_models, "--mode", "native").exit_code == 0
    conn = sqlite3.connect(store / "catalog.sqlite")
    digests = [r[0] for r in conn.execute("SELECT chunk_sha256 FROM chunks")]
    conn.close()
    assert digests and all(len(d) == 64 for d in digests)
    assert check(store).exit_code == 0


def test_embedding_bytes_are_what_the_index_holds(store):
    from cag.store import Store
    opened = Store.open(store)
    try:
        ids, vectors = opened.catalog.embeddings(opened.config.embedding_dim)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
        assert sorted(opened.index().ids().tolist()) == sorted(ids.tolist())
    finally:
        opened.close()


def replace_header(path, header: bytes) -> None:
    """Put `header` (padded with spaces to the old header's length) where the safetensors header is."""
    import struct
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert len(header) <= length
    path.write_bytes(data[:8] + header.ljust(length) + data[8 + length:])


@pytest.mark.parametrize("header", [b"[1, 2]", b"123", b"null", b'"cag.sha256"', b'{"__metadata__": "cag.sha256"}',
                                   b'{"__metadata__": ["cag.sha256"]}'])
def test_a_cache_header_of_valid_json_but_not_an_object_is_a_damaged_cache(tmp_path, header):
    from cag.errors import CorruptCacheError
    from cag.kv.serde import load_chunk_cache, save_chunk_cache
    from tests.tiny_models import tiny_lm
    from cag.kv.chunk_cache import prefill_chunks

    lm = tiny_lm("llama")
    path = tmp_path / "chunk.safetensors"
    save_chunk_cache(prefill_chunks(lm, ["The quick brown fox."], ())[0], path)
    replace_header(path, header)
    with pytest.raises(CorruptCacheError, match="chunk.safetensors"):
        load_chunk_cache(path)


def test_a_cache_header_that_is_not_an_object_is_reported_repaired_and_one_line_in_ask(store, tiny_models):
    caches = sorted((store / "caches").rglob("*.safetensors"))
    for path in caches:
        replace_header(path, b"[]")
    found = check(store)
    assert found.exit_code == 1 and found.output.count("cache: ") == len(caches), found.output
    assert "corrupted header" in found.output
    repaired = check(store, "--repair")
    assert repaired.exit_code == 0 and "No problems found" in repaired.output, repaired.output
    for path in caches:
        replace_header(path, b"[]")
    answer = ask(store, tiny_models, "--mode", "native", top_k=1)
    assert answer.exit_code == 1 and handled(answer), answer.output
    assert len(answer.output.strip().splitlines()) == 1 and "--also-for" in answer.output


def test_index_and_space_descriptions_of_valid_json_but_not_objects_are_damage(store, tiny_models):
    model_json = next((store / "caches").glob("*/model.json"))
    for bad in (b'"x"', b"[1]", b"7", b"null"):
        (store / "index.json").write_bytes(bad)
        model_json.write_bytes(bad)
        found = check(store)
        assert found.exit_code == 1 and "index: " in found.output and "space: " in found.output, found.output
    assert ask(store, tiny_models, "--mode", "direct").exit_code == 0  # the index is rebuilt from the catalog
