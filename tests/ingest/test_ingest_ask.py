"""Ingest then ask, end to end with tiny models (library API)."""

import numpy as np
import pytest

from cag.ask import ask
from cag.errors import CagError
from cag.ingest.pipeline import IngestOptions, ingest
from cag.kv.serde import load_chunk_cache
from cag.store import Store


def options(tiny_models, **extra):
    return IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32, **extra)


def test_ingest_reads_every_format_and_skips_binary(tiny_models, corpus, tmp_path):
    report = ingest([corpus], tmp_path / "store", options(tiny_models))
    assert report.files_seen == 5 and report.files_ingested == 4
    assert [p for p, _ in report.skipped] == [str(corpus / "sub" / "blob.txt")]
    store = Store.open(tmp_path / "store")
    counts = store.catalog.counts()
    assert counts["files"] == 4 and counts["documents"] == 5  # the JSON Lines file gives 2 records
    assert counts["chunks"] == report.chunks_total >= 5
    docs = {c.doc for c in store.catalog.all_chunks()}
    assert str(corpus / "sub" / "storm.jsonl") + "#L2" in docs
    html = [c for c in store.catalog.all_chunks() if c.doc.endswith("planet.html")]
    assert html and "var x" not in html[0].text and "Upsilon" in html[0].text
    space = store.spaces()[0]
    for chunk in store.catalog.all_chunks():  # one cache per chunk, matching its text
        cache = load_chunk_cache(store.cache_path(space, chunk.text_sha256))
        assert cache.text == chunk.text and cache.dtype.is_floating_point
    assert store.index().info.count == counts["chunks"]


def test_identical_text_is_cached_once_and_counted_once(tiny_models, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    text = "Mount Elbert is the highest summit of the Rocky Mountains. " * 3
    (folder / "a.txt").write_text(text)
    (folder / "b.txt").write_text(text)
    report = ingest([folder], tmp_path / "store", options(tiny_models))
    counts = Store.open(tmp_path / "store").catalog.counts()
    assert counts["documents"] == 2 and counts["tokens"] == 2 * counts["distinct_tokens"] > 0
    assert report.caches_written == counts["chunks"] // 2


def test_rerun_does_no_model_work_and_changes_are_tracked(tiny_models, corpus, tmp_path):
    ingest([corpus], tmp_path / "store", options(tiny_models))
    again = ingest([corpus], tmp_path / "store", options(tiny_models))
    assert again.files_unchanged == 4 and again.caches_written == 0 and again.tokens_prefilled == 0
    (corpus / "mountain.txt").write_text("Mount Elbert was first climbed in 1874 by H. W. Stuart.")
    (corpus / "lobster.md").unlink()
    changed = ingest([corpus], tmp_path / "store", options(tiny_models))
    store = Store.open(tmp_path / "store")
    new_chunks = [c for c in store.catalog.all_chunks() if c.doc.endswith("mountain.txt")]
    assert changed.files_ingested == 1 and changed.files_removed == 1
    assert changed.caches_written == len(new_chunks) == changed.chunks_new
    texts = " ".join(c.text for c in store.catalog.all_chunks())
    assert "1874" in texts and "lobster" not in texts and "14,440" not in texts
    files = list((store.folder / "caches").rglob("*.safetensors"))
    assert len(files) == store.catalog.counts()["chunks"]  # old caches collected


def test_encoder_caches_can_wait_for_a_later_ingest(tiny_models, corpus, tmp_path):
    generator = tiny_models["generator"]
    first = ingest([corpus], tmp_path / "store", options(tiny_models, also_for=(generator,),
                                                        encoder_caches=False))
    store = Store.open(tmp_path / "store")
    chunks = store.catalog.all_chunks()
    assert [s.role for s in store.spaces()] == ["native"]  # only the generator's caches
    assert first.caches_written == len({c.text_sha256 for c in chunks}) > 0
    assert all(c.n_tokens > 0 for c in chunks)  # chunks still counted in encoder tokens
    native = ask("How long can the European lobster grow?", tmp_path / "store", model=generator,
                 top_k=1, mode="native", max_new_tokens=4)
    assert native.mode == "native" and native.context_tokens > 0
    second = ingest([corpus], tmp_path / "store", options(tiny_models, also_for=(generator,)))
    store = Store.open(tmp_path / "store")
    encoder = next(s for s in store.spaces() if s.role == "encoder")
    assert second.caches_written == first.caches_written  # the encoder's, and nothing else
    assert all(store.cache_path(encoder, c.text_sha256).is_file() for c in chunks)


def test_store_refuses_another_encoder(tiny_models, corpus, tmp_path):
    ingest([corpus / "mountain.txt"], tmp_path / "store", options(tiny_models))
    with pytest.raises(CagError, match="built with encoder"):
        ingest([corpus], tmp_path / "store", IngestOptions(encoder=tiny_models["generator"]))


def test_native_and_direct_agree_with_one_chunk(tiny_models, corpus, tmp_path):
    ingest([corpus], tmp_path / "store", options(tiny_models, also_for=(tiny_models["generator"],)))
    question = "How long can the European lobster grow?"
    native = ask(question, tmp_path / "store", model=tiny_models["generator"], top_k=1, mode="native",
                 max_new_tokens=8)
    direct = ask(question, tmp_path / "store", model=tiny_models["generator"], top_k=1, mode="direct",
                 max_new_tokens=8)
    assert native.mode == "native" and direct.mode == "direct"
    assert native.answer == direct.answer
    assert native.sources == direct.sources and native.context_tokens == direct.context_tokens > 0
    assert set(native.timings_ms) == {"warmup", "embed", "retrieve", "load", "translate", "assemble",
                                      "prefill", "ttft", "total"}


def test_auto_mode_says_what_it_chose(tiny_models, corpus, tmp_path):
    ingest([corpus], tmp_path / "store", options(tiny_models))
    result = ask("Who named Mount Elbert?", tmp_path / "store", model=tiny_models["generator"],
                 top_k=2, mode="auto", max_new_tokens=4)
    assert result.mode == "direct" and "no native caches" in result.notes[0]
    with pytest.raises(CagError, match="--also-for"):
        ask("Who?", tmp_path / "store", model=tiny_models["generator"], mode="native")
    with pytest.raises(CagError, match="translator"):
        ask("Who?", tmp_path / "store", model=tiny_models["generator"], mode="translated")


def test_top_k_above_chunk_count_is_clamped(tiny_models, corpus, tmp_path):
    ingest([corpus / "sub" / "planet.html"], tmp_path / "store", options(tiny_models))
    result = ask("When was it found?", tmp_path / "store", model=tiny_models["generator"], top_k=50,
                 mode="direct", max_new_tokens=2)
    assert len(result.sources) == Store.open(tmp_path / "store").catalog.counts()["chunks"]
    assert "--top-k 50" in result.notes[0]


def test_none_mode_uses_no_context(tiny_models, corpus, tmp_path):
    ingest([corpus / "mountain.txt"], tmp_path / "store", options(tiny_models))
    result = ask("Who?", tmp_path / "store", model=tiny_models["generator"], mode="none", max_new_tokens=2)
    assert result.context_tokens == 0 and result.sources == []


def test_stale_index_is_rebuilt_from_the_catalog(tiny_models, corpus, tmp_path):
    ingest([corpus], tmp_path / "store", options(tiny_models))
    store = Store.open(tmp_path / "store")
    ids, vectors = store.catalog.embeddings(store.config.embedding_dim)
    (store.folder / "index.faiss").unlink()
    rebuilt = Store.open(tmp_path / "store").index()
    scores, found = rebuilt.search(vectors[:1], 1)
    assert rebuilt.info.count == len(ids) and found[0][0] == ids[0]
    assert np.isclose(scores[0][0], 1.0, atol=1e-5)


def test_asks_find_their_cache_spaces_without_walking_the_cache_files(tiny_models, corpus, tmp_path, monkeypatch):
    """Every ask looks its spaces up; a store of a million chunks has a million cache files, so the
    lookup reads the spaces' model.json and nothing under their shards."""
    import cag.store.spaces as spaces_module

    generator = tiny_models["generator"]
    ingest([corpus], tmp_path / "store", options(tiny_models, also_for=(generator,)))
    store = Store.open(tmp_path / "store")
    everything = [e.path for e in spaces_module.walk_caches(store.caches_folder) if e.kind == "model"]
    (store.caches_folder / "0123456789abcdef").mkdir()  # a space folder without its model.json
    (store.caches_folder / "notes").mkdir()  # not cag's
    monkeypatch.setattr(spaces_module, "_walk_shard", lambda *a: pytest.fail("walked a space's cache files"))
    assert sorted(s.role for s in store.spaces()) == ["encoder", "native"] and len(everything) == 2
    native = ask("How long can the European lobster grow?", tmp_path / "store", model=generator,
                 top_k=2, mode="native", max_new_tokens=2)
    assert native.mode == "native" and native.context_tokens > 0


def test_small_files_share_prefill_batches_and_each_keeps_its_own_rows(tiny_models, tmp_path, monkeypatch):
    import cag.ingest.pipeline as pipeline

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(6):  # one short paragraph per file: one chunk each
        (folder / f"p{i}.txt").write_text(f"Paragraph {i}: the harbour master logged {i * 7} ships.")
    batches = []
    real = pipeline.prefill_chunks
    monkeypatch.setattr(pipeline, "prefill_chunks", lambda lm, texts, *a, **k: batches.append(len(texts))
                        or real(lm, texts, *a, **k))
    report = ingest([folder], tmp_path / "store", IngestOptions(encoder=tiny_models["encoder"], batch_size=4))
    assert batches == [4, 2] and report.caches_written == 6 and report.files_ingested == 6
    store = Store.open(tmp_path / "store")
    space = store.spaces()[0]
    for chunk in store.catalog.all_chunks():  # each file's rows: its own text, its own cache
        assert chunk.text.startswith(f"Paragraph {chunk.doc_path[-5]}:")
        assert load_chunk_cache(store.cache_path(space, chunk.text_sha256)).text == chunk.text
    assert store.index().info.count == 6
