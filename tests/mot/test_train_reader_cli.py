"""`cag train-reader` with tiny models: a native reader and a translated reader (translator frozen),
installed where the reader modes find them; resume after kill -9; bad input refused."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from cli.main import app
from tests.mot.test_train_cli import text_corpus, train_args  # noqa: F401  (the fixture)
from tests.readers.test_reader_modes import cache_digests


def ask_json(store, tiny_models, *extra):
    result = invoke("ask", "Who wrote the first program?", "--store", store, "--model", tiny_models["generator"],
                    "--json", "--max-new-tokens", 4, "--top-k", 2, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])

runner = CliRunner()
FACTS = ["The bridge was renamed after Alfred Nobel in 1998.", "Its length is 2,048 metres.",
         "Ada Lovelace wrote the first program in 1843.", "The report was written by the committee in 1999."]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def fact_corpus(tmp_path):
    path = tmp_path / "facts.jsonl"
    rows = [{"text": " ".join(FACTS[(i + j) % 4] for j in range(3))} for i in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def reader_args(tiny_models, corpus, out, reads="native", steps=3):
    return ["train-reader", "--generator", tiny_models["generator"], "--encoder", tiny_models["encoder"],
            "--reads", reads, "--corpus", corpus, "--heldout", corpus, "--windows", 4, "--heldout-windows", 2,
            "--chunk-tokens", 48, "--chunk-counts", "1,3", "--max-context-tokens", 200, "--cloze", 2,
            "--generated", 1, "--answer-tokens", 3, "--steps", steps, "--batch", 2, "--eval-every", 2,
            "--checkpoint-every", 2, "--rank", 4, "--dtype", "fp32", "--lr", 1e-2, "--out", out]


def test_train_a_native_reader(tiny_models, fact_corpus, tmp_path, cag_home):
    out = tmp_path / "run"
    result = invoke(*reader_args(tiny_models, fact_corpus, out), "--data", tmp_path / "data")
    assert result.exit_code == 0, result.output
    record = json.loads((out / "reader.json").read_text())
    spec = record["spec"]
    assert spec["reads"] == "native" and spec["rank"] == 4 and spec["target_modules"][0] == "q_proj"
    held = spec["metrics"]["heldout"]
    assert held["without_adapter"]["questions"] == held["with_adapter"]["questions"] > 0
    assert spec["training"]["examples"] > 0 and spec["training"]["parameters"] > 0
    steps = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps[0]["event"] == "baseline" and [r["step"] for r in steps if "step" in r] == [1, 2, 3]
    installed = list((cag_home / "readers").glob("*__native__reader.safetensors"))
    assert len(installed) == 1
    data = sorted(p.name for p in (tmp_path / "data" / "train").iterdir())
    assert "w00000.native.safetensors" in data and "w00000.safetensors" in data


def test_train_a_translated_reader_on_shared_data(tiny_models, fact_corpus, text_corpus, tmp_path, cag_home):  # noqa: F811
    data = tmp_path / "data"
    no_translator = invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "t0", "translated"))
    assert no_translator.exit_code == 1 and "no mot translator" in no_translator.output
    assert invoke(*train_args(tiny_models, text_corpus, tmp_path / "mot", steps=2)).exit_code == 0
    assert invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "n", steps=1), "--data", data).exit_code == 0
    teacher = (data / "train" / "w00000.safetensors").stat().st_mtime_ns
    result = invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "t", "translated"), "--data", data)
    assert result.exit_code == 0, result.output
    spec = json.loads((tmp_path / "t" / "reader.json").read_text())["spec"]
    translator = json.loads(next((cag_home / "translators").glob("*__mot.json")).read_text())
    assert spec["reads"] == translator["fingerprint"] and spec["reads_name"].endswith("(mot)")
    assert (data / "train" / "w00000.safetensors").stat().st_mtime_ns == teacher  # the teacher reused
    assert (data / "train" / f"w00000.{translator['fingerprint'][:16]}.safetensors").is_file()
    assert list((cag_home / "readers").glob("*__mot__reader.safetensors"))
    other = invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "t2", "translated"), "--data", data,
                   "--answer-tokens", 5)
    assert other.exit_code == 1 and "another --data folder" in other.output
    # asked through the reader: the stored translations are the ones translated mode made and reads
    store = tmp_path / "store"
    assert invoke("ingest", fact_corpus, "--store", store, "--encoder", tiny_models["encoder"],
                  "--chunk-tokens", 32).exit_code == 0
    plain = ask_json(store, tiny_models, "--mode", "translated")
    stored = cache_digests(store)
    adapted = ask_json(store, tiny_models, "--mode", "translated+reader")
    assert adapted["mode"] == "translated+reader" and adapted["timings_ms"]["translate"] == 0
    assert adapted["context_tokens"] == plain["context_tokens"] and cache_digests(store) == stored
    # auto: the reader's recorded retention clears the threshold where the translator's does not
    for folder, retention in (("translators", 0.6), ("readers", 0.8)):
        path = next((cag_home / folder).glob("*mot*.json"))
        record = json.loads(path.read_text())
        record["spec"]["metrics"]["qa"] = {"retention": retention}
        path.write_text(json.dumps(record))
    auto = ask_json(store, tiny_models)
    assert auto["mode"] == "translated+reader" and "keeps 0.80" in " ".join(auto["notes"])


def test_killed_reader_training_resumes(tiny_models, fact_corpus, tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "cli", *map(str, reader_args(tiny_models, fact_corpus, out, steps=5)), "--no-install"]
    killed = subprocess.run(args, env={**os.environ, "CAG_FAULT": "reader_checkpoint:2"}, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert json.loads((out / "state.json").read_text())["step"] == 4
    done = invoke(*reader_args(tiny_models, fact_corpus, out, steps=5), "--no-install")  # resumed here
    assert done.exit_code == 0, done.output
    records = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "step" in r] == [1, 2, 3, 4, 5]  # each step once
    assert [r["event"] for r in records if "event" in r] == ["baseline", "final"]


def test_bad_reader_input(tiny_models, fact_corpus, tmp_path):
    result = invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "a", reads="text"))
    assert result.exit_code == 1 and "Unknown --reads 'text'" in result.output
    result = invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "b"), "--targets", "mlp")
    assert result.exit_code == 1 and "Unknown --targets 'mlp'" in result.output
    result = invoke(*reader_args(tiny_models, fact_corpus, tmp_path / "c"), "--cloze", 0, "--generated", 0)
    assert result.exit_code == 1 and "needs questions" in result.output


def test_train_link_tokens_and_answer_with_them(tiny_models, fact_corpus, tmp_path, cag_home):
    out = tmp_path / "links"
    result = invoke(*reader_args(tiny_models, fact_corpus, out, steps=2), "--adapter", "links", "--link-tokens", 2)
    assert result.exit_code == 0, result.output
    spec = json.loads((out / "reader.json").read_text())["spec"]
    assert (spec["kind"], spec["link_tokens"], spec["rank"]) == ("links", 2, 0)
    assert list((cag_home / "readers").glob("*__native__links.safetensors"))
    store = tmp_path / "store"
    assert invoke("ingest", fact_corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                  "--also-for", tiny_models["generator"]).exit_code == 0
    native = ask_json(store, tiny_models, "--mode", "native")
    linked = ask_json(store, tiny_models, "--mode", "native+links")
    assert linked["mode"] == "native+links" and linked["timings_ms"]["links"] > 0
    assert linked["context_tokens"] == native["context_tokens"]  # the links are not context
    refused = invoke("ask", "Q?", "--store", store, "--model", tiny_models["generator"], "--mode", "native+reader")
    assert refused.exit_code == 1 and "no lora reader adapter" in refused.output  # a links reader is not a LoRA one
