"""Reader modes end to end with tiny models: native+reader and translated+reader read the same stored
caches as native and translated (the adapter never touches them), refuse without the right adapter,
and --mode auto follows the retention recorded with an adapter; direct never uses one."""

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cag.models import load_model
from cag.testing import save_tiny_reader
from cli.main import app

runner = CliRunner()
SQUAD5 = Path(__file__).parent.parent / "eval" / "squad5.jsonl"
QUESTION = "How long can the European lobster grow?"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def ask_json(store, tiny_models, *extra, question=QUESTION):
    result = invoke("ask", question, "--store", store, "--model", tiny_models["generator"], "--json",
                    "--max-new-tokens", 6, "--top-k", 3, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def cache_digests(store: Path) -> dict:
    return {p.relative_to(store): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((store / "caches").rglob("*.safetensors"))}


@pytest.fixture(scope="module")
def native_store(tiny_models, tmp_path_factory):
    from cag.testing import tiny_tokenizer  # noqa: F401  (tiny models share it)
    root = tmp_path_factory.mktemp("reader_store")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The European lobster may grow to a length of 60 cm. It is blue in life. " * 3)
    (corpus / "b.txt").write_text("Mount Elbert is the highest summit of the Rocky Mountains, at 14,440 feet. " * 3)
    (corpus / "c.txt").write_text("Hurricane Beatriz formed in June 2011 near Mexico and caused heavy rain. " * 3)
    store = root / "store"
    result = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 24,
                    "--also-for", tiny_models["generator"])
    assert result.exit_code == 0, result.output
    return store


@pytest.fixture(scope="module")
def generator(tiny_models):
    return load_model(tiny_models["generator"])


def install_reader(cag_home, generator, name="native", reads="native", reads_name="native", scale=0.0, qa=None):
    path = save_tiny_reader(generator, cag_home / "readers" / name, reads, reads_name, scale=scale)
    if qa is not None:
        record = json.loads(path.with_name(f"{name}.json").read_text())
        record["spec"]["metrics"]["qa"] = qa
        path.with_name(f"{name}.json").write_text(json.dumps(record))
    return path


def test_native_reader_reads_the_same_caches(native_store, tiny_models, generator, cag_home):
    refused = invoke("ask", QUESTION, "--store", native_store, "--model", tiny_models["generator"],
                     "--mode", "native+reader")
    assert refused.exit_code == 1 and "no lora reader adapter for" in refused.output
    assert "cag train-reader --generator" in refused.output and len(refused.output.strip().splitlines()) == 1
    before = cache_digests(native_store)
    native = ask_json(native_store, tiny_models, "--mode", "native")
    install_reader(cag_home, generator, scale=0.0)  # B = 0: the adapter adds nothing
    same = ask_json(native_store, tiny_models, "--mode", "native+reader")
    assert same["mode"] == "native+reader" and same["answer"] == native["answer"]
    assert same["context_tokens"] == native["context_tokens"]
    install_reader(cag_home, generator, scale=3.0)  # a strong adapter: other answers, the same caches
    questions = [QUESTION, "How tall is Mount Elbert?", "When did Hurricane Beatriz form?"]
    plain = [ask_json(native_store, tiny_models, "--mode", "native", question=q)["answer"] for q in questions]
    adapted = [ask_json(native_store, tiny_models, "--mode", "native+reader", question=q)["answer"] for q in questions]
    assert plain != adapted
    assert cache_digests(native_store) == before  # no cache written, none changed


def test_a_reader_for_another_generator_version_is_refused(native_store, tiny_models, generator, cag_home):
    path = install_reader(cag_home, generator, scale=0.5)
    record_path = path.with_name("native.json")
    record = json.loads(record_path.read_text())
    record["spec"]["generator_fingerprint"] = "0" * 64
    record_path.write_text(json.dumps(record))
    refused = invoke("ask", QUESTION, "--store", native_store, "--model", tiny_models["generator"],
                     "--mode", "native+reader")
    assert refused.exit_code == 1 and "another version of the generator" in refused.output
    assert len(refused.output.strip().splitlines()) == 1


def test_direct_never_uses_a_reader(native_store, tiny_models, generator, cag_home):
    from cag.ask import ask
    from cag.readers.lora import lora_layers
    direct = ask(QUESTION, native_store, tiny_models["generator"], top_k=3, mode="direct", max_new_tokens=6)
    install_reader(cag_home, generator, scale=3.0)
    lm = load_model(tiny_models["generator"])
    adapted = ask(QUESTION, native_store, top_k=3, mode="native+reader", max_new_tokens=6, lm=lm)
    assert lm.readers and lora_layers(lm.model) and all(layer.disable_adapters for layer in lora_layers(lm.model))
    again = ask(QUESTION, native_store, top_k=3, mode="direct", max_new_tokens=6, lm=lm)
    assert again.answer == direct.answer and adapted.mode == "native+reader"


def test_auto_uses_a_native_reader_that_recorded_a_gain(native_store, tiny_models, generator, cag_home):
    assert ask_json(native_store, tiny_models)["mode"] == "native"  # none installed
    install_reader(cag_home, generator, scale=0.5, qa={"retention": 0.7, "base_retention": 0.8})
    worse = ask_json(native_store, tiny_models)
    assert worse["mode"] == "native" and "below native's 0.80" in " ".join(worse["notes"])
    install_reader(cag_home, generator, scale=0.5, qa={"retention": 0.9, "base_retention": 0.8})
    better = ask_json(native_store, tiny_models)
    assert better["mode"] == "native+reader" and "keeps 0.90 (native 0.80)" in " ".join(better["notes"])


def test_eval_compares_each_reader_mode_with_its_base(native_store, tiny_models, generator, cag_home, tmp_path):
    install_reader(cag_home, generator, scale=0.0)
    out = tmp_path / "eval"
    result = invoke("eval", "--dataset", SQUAD5, "--task", "extractive", "--model", tiny_models["generator"],
                    "--encoder", tiny_models["encoder"], "--max-new-tokens", 3, "--out", out,
                    "--modes", "direct,native,native+reader")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    diff = metrics["paired_differences"]["native+reader - native"]
    assert diff == {"n": 5, "mean": 0.0, "ci95": [0.0, 0.0]}  # a zero adapter answers as native does
    assert metrics["modes"]["native+reader"]["bytes_stored_per_context_token"] == \
        metrics["modes"]["native"]["bytes_stored_per_context_token"]
    from eval.reader_qa import reader_qa_results
    qa = reader_qa_results(out, "native")["qa"]  # what scripts/record_reader_qa.py writes for auto
    assert (qa["mode"], qa["base_mode"], qa["questions"]) == ("native+reader", "native", 5)
    assert qa["retention"] == metrics["modes"]["native+reader"]["retention"] == qa["base_retention"]
    assert qa["difference"] == diff and reader_qa_results(out, "encoder") == {}
    missing = invoke("eval", "--dataset", SQUAD5, "--task", "extractive", "--model", tiny_models["generator"],
                     "--encoder", tiny_models["encoder"], "--out", tmp_path / "e2", "--modes",
                     "direct,translated+reader")
    assert missing.exit_code == 1 and "cannot run" in missing.output
