"""`cag ingest`, `cag ask`, `cag store` through the CLI: outputs, and the bad-input table."""

import json

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def store(tiny_models, corpus, tmp_path):
    path = tmp_path / "store"
    result = invoke("ingest", corpus, "--store", path, "--encoder", tiny_models["encoder"],
                    "--chunk-tokens", 32, "--also-for", tiny_models["generator"])
    assert result.exit_code == 0, result.output
    assert "4 ingested" in result.output and "1 skipped" in result.output
    return path


def test_ask_json_has_every_field(store, tiny_models):
    result = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                    tiny_models["generator"], "--json", "--max-new-tokens", 4, "--top-k", 2)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(data) >= {"answer", "mode", "model", "sources", "context_tokens", "timings_ms"}
    assert data["mode"] == "native" and len(data["sources"]) == 2
    assert set(data["sources"][0]) == {"doc", "chunk", "score"}
    assert set(data["timings_ms"]) == {"warmup", "embed", "retrieve", "load", "translate", "assemble",
                                       "prefill", "ttft", "total"}


def test_ask_in_bf16_and_a_missing_gpu_is_one_line(store, tiny_models, monkeypatch):
    for mode in ("direct", "native"):
        result = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                        tiny_models["generator"], "--json", "--max-new-tokens", 4, "--mode", mode,
                        "--dtype", "bf16")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout.strip().splitlines()[-1])["mode"] == mode
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    result = invoke("ask", "Who?", "--store", store, "--model", tiny_models["generator"], "--device", "cuda")
    assert result.exit_code == 1 and "torch sees no CUDA GPU" in result.output
    assert "Traceback" not in result.output


def test_ask_streams_and_shows_sources(store, tiny_models):
    result = invoke("ask", "Who named Mount Elbert?", "--store", store, "--model",
                    tiny_models["generator"], "--show-sources", "--max-new-tokens", 3, "--mode", "direct")
    assert result.exit_code == 0, result.output
    assert "mountain.txt" in result.output and "[direct |" in result.output


def test_store_info_list_remove(store, corpus):
    info = invoke("store", "info", "--store", store, "--json")
    assert info.exit_code == 0 and json.loads(info.output)["files"] == 4
    listing = invoke("store", "list", "--store", store)
    assert "planet.html" in listing.output
    removed = invoke("store", "remove", corpus / "sub", "--store", store)
    assert removed.exit_code == 0 and "Removed 2 file(s)" in removed.output
    assert json.loads(invoke("store", "info", "--store", store, "--json").output)["files"] == 2



def test_store_prune_native_caches(store, tiny_models, corpus):
    pruned = invoke("store", "prune", "--store", store, "--role", "native")
    assert pruned.exit_code == 0 and "from 1 cache space(s)" in pruned.output, pruned.output
    roles = [s["role"] for s in json.loads(invoke("store", "info", "--store", store, "--json").output)["cache_spaces"]]
    assert roles == ["encoder"]
    native = invoke("ask", "Who?", "--store", store, "--model", tiny_models["generator"], "--mode", "native")
    assert native.exit_code == 1 and "--also-for" in native.output
    again = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"],
                   "--also-for", tiny_models["generator"])
    assert again.exit_code == 0, again.output
    answer = invoke("ask", "Who?", "--store", store, "--model", tiny_models["generator"], "--mode", "native",
                    "--max-new-tokens", 2)
    assert answer.exit_code == 0, answer.output


def test_corrupted_cache_is_named_with_the_fix(store, tiny_models):
    caches = sorted((store / "caches").rglob("*.safetensors"))
    for path in caches:  # damage every cache so that whatever is retrieved is corrupted
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))
    result = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                    tiny_models["generator"], "--mode", "native", "--top-k", 1)
    assert result.exit_code == 1
    assert "failed its checksum" in result.output and ".safetensors" in result.output
    assert "re-ingest" in result.output and "cag ingest" in result.output


def bad_inputs(store, tiny_models, tmp_path):
    gen = tiny_models["generator"]
    return [
        (["ask", "Who?", "--store", tmp_path / "nothing"], "No cag store at"),
        (["ask", "Who?", "--store", store, "--model", "no-such-model"], "Unknown model 'no-such-model'"),
        (["ask", "  ", "--store", store, "--model", gen], "The question is empty"),
        (["ask", "Who?", "--store", store, "--model", gen, "--top-k", 0], "--top-k must be at least 1"),
        (["ask", "Who?", "--store", store, "--model", gen, "--mode", "fast"], "Unknown mode 'fast'"),
        (["ask", "Who? " * 10_000, "--store", store, "--model", gen], "Shorten the question"),
        (["ask", "Who?", "--store", store, "--model", gen, "--mode", "translated"], "Cannot answer in mode translated: no translator"),
        (["ingest", tmp_path / "missing-folder", "--store", store], "No such file or folder"),
        (["ingest", tmp_path, "--store", store, "--encoder", gen], "built with encoder"),
        (["ingest", tmp_path, "--store", store, "--embedder", "other-embedder"], "built with embedder"),
    ]


def test_bad_input_table(store, tiny_models, tmp_path):
    for args, message in bad_inputs(store, tiny_models, tmp_path):
        result = invoke(*args)
        assert result.exit_code == 1, (args, result.output)
        assert message in result.output, (args, result.output)
        assert "Traceback" not in result.output


def test_empty_store_and_context_too_long(tiny_models, tmp_path, corpus):
    empty = tmp_path / "empty_store"
    (tmp_path / "nothing_here").mkdir()
    assert invoke("ingest", tmp_path / "nothing_here", "--store", empty, "--encoder",
                  tiny_models["encoder"]).exit_code == 0
    result = invoke("ask", "Who?", "--store", empty, "--model", tiny_models["generator"])
    assert result.exit_code == 1 and "is empty" in result.output
    # a generator with 128 positions cannot hold the whole corpus
    from tests.tiny_models import save_tiny_model
    short = save_tiny_model(tmp_path / "short", "llama", max_position_embeddings=128)
    store = tmp_path / "store"
    invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 64)
    result = invoke("ask", "Who?", "--store", store, "--model", short, "--mode", "direct", "--top-k", 20)
    assert result.exit_code == 1 and "at most 128" in result.output


def test_ingest_reuses_another_stores_caches(store, tiny_models, corpus, tmp_path):
    other = tmp_path / "other"
    result = invoke("ingest", corpus, "--store", other, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                    "--also-for", tiny_models["generator"], "--reuse-caches-from", store)
    assert result.exit_code == 0, result.output
    assert "0 caches prefilled (0 tokens)" in result.output and "reused from other stores" in result.output
    linked = sorted((other / "caches").rglob("*.safetensors"))
    assert linked and all(p.stat().st_nlink == 2 for p in linked)
    answer = invoke("ask", "Who named Mount Elbert?", "--store", other, "--model", tiny_models["generator"],
                    "--mode", "native", "--max-new-tokens", 2)
    assert answer.exit_code == 0, answer.output
    bad = invoke("ingest", corpus, "--store", tmp_path / "third", "--encoder", tiny_models["encoder"],
                 "--reuse-caches-from", tmp_path / "nowhere")
    assert bad.exit_code == 1 and "not a cag store" in bad.output


def test_integer_cache_storage_is_read_by_every_mode(tiny_models, corpus, tmp_path):
    """Stores of int8, int4 and int4k-int3v chunk caches (cag.kv.quantize) are smaller than fp16's and
    answer natively; an unknown storage dtype is refused before any model work."""
    sizes = {}
    for dtype in ("fp16", "int4k-int3v", "int4", "int8"):
        path = tmp_path / dtype
        result = invoke("ingest", corpus, "--store", path, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                        "--also-for", tiny_models["generator"], "--cache-dtype", dtype)
        assert result.exit_code == 0, result.output
        sizes[dtype] = sum(f.stat().st_size for f in (path / "caches").rglob("*.safetensors"))
        answer = invoke("ask", "How long can the European lobster grow?", "--store", path, "--model",
                        tiny_models["generator"], "--mode", "native", "--json", "--max-new-tokens", 3)
        assert answer.exit_code == 0, answer.output
    assert sizes["int4k-int3v"] < sizes["int4"] < sizes["int8"] < sizes["fp16"]
    refused = invoke("ingest", corpus, "--store", tmp_path / "x", "--cache-dtype", "int3")
    assert refused.exit_code == 1 and "Unknown cache dtype 'int3'" in refused.output
