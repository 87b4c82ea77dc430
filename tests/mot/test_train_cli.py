"""`cag train` with tiny models: run folder, install, resume after kill -9; translated answers in
`cag ask` (end to end, the quality gate) and `cag eval`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()
SQUAD5 = Path(__file__).parent.parent / "eval" / "squad5.jsonl"
SENTENCES = ["The European lobster may grow to a length of 60 cm.", "Mount Elbert is 14,440 feet high.",
             "Hurricane Beatriz formed in June 2011 near Mexico.", "It is blue in life and red after cooking.",
             "Samuel Hitt Elbert was a governor.", "Upsilon Andromedae b was found in 1996."]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def text_corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [{"text": " ".join(SENTENCES[(i + j) % len(SENTENCES)] for j in range(8))} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def train_args(tiny_models, corpus, out, kind="mot", steps=4):
    return ["train", "--source", tiny_models["encoder"], "--target", tiny_models["generator"],
            "--corpus", corpus, "--heldout", corpus, "--kind", kind, "--steps", steps, "--windows", 6,
            "--heldout-windows", 2, "--chunk-tokens", 16, "--continuation-tokens", 8, "--eval-every", 2,
            "--checkpoint-every", 2, "--out", out]


def test_train_writes_run_folder_and_installs(tiny_models, text_corpus, tmp_path, cag_home):
    out = tmp_path / "run"
    result = invoke(*train_args(tiny_models, text_corpus, out))
    assert result.exit_code == 0, result.output
    for name in ("config.json", "metrics.jsonl", "translator.safetensors", "translator.json", "state.json"):
        assert (out / name).is_file(), name
    record = json.loads((out / "translator.json").read_text())
    spec = record["spec"]
    assert spec["kind"] == "mot" and spec["experts"] == 4 and spec["top_k"] == 2
    assert len(spec["layer_map"]) == spec["target"]["geometry"]["num_layers"]
    assert spec["source"]["geometry"]["family"] == "llama" and spec["target"]["geometry"]["family"] == "qwen2"
    held = spec["metrics"]["heldout"]
    assert set(held) >= {"full", "window", "none"} and held["full"]["kl"] >= 0
    assert spec["training"]["steps"] == 4 and spec["training"]["train_seconds"] > 0
    steps = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if "step" in r] == [1, 2, 3, 4]
    assert "heldout" in steps[1]
    assert list((cag_home / "translators").glob("*__mot.safetensors"))


def test_killed_training_resumes_from_its_checkpoint(tiny_models, text_corpus, tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "cli", *map(str, train_args(tiny_models, text_corpus, out, steps=6))]
    env = {**os.environ, "CAG_FAULT": "train_checkpoint:2"}  # killed right after the step-4 checkpoint
    killed = subprocess.run(args, env=env, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert json.loads((out / "state.json").read_text())["step"] == 4
    assert not (out / "translator.safetensors").exists()
    done = subprocess.run(args, capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "CAG_FAULT"})
    assert done.returncode == 0, done.stderr
    steps = [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()
             if "step" in json.loads(l)]
    assert steps == [1, 2, 3, 4, 5, 6]  # each step once
    assert (out / "translator.safetensors").is_file()


def test_train_continues_from_a_trained_translator(tiny_models, text_corpus, tmp_path):
    from safetensors.torch import load_file
    first = tmp_path / "first"
    assert invoke(*train_args(tiny_models, text_corpus, first, steps=2)).exit_code == 0
    start = json.loads((first / "translator.json").read_text())
    # no steps: the translator is the one it started from (no ridge fit replaced it)
    same = tmp_path / "same"
    result = invoke(*train_args(tiny_models, text_corpus, same, steps=0), "--init", first / "translator")
    assert result.exit_code == 0, result.output
    assert json.loads((same / "translator.json").read_text())["weights_sha256"] == start["weights_sha256"]
    tuned = tmp_path / "tuned"
    result = invoke(*train_args(tiny_models, text_corpus, tuned, steps=2), "--init", first / "translator.safetensors")
    assert result.exit_code == 0, result.output
    record = json.loads((tuned / "translator.json").read_text())
    assert record["spec"]["training"]["init_weights_sha256"] == start["weights_sha256"]
    assert record["spec"]["training"]["steps"] == 2 and record["weights_sha256"] != start["weights_sha256"]
    before, after = load_file(str(first / "translator.safetensors")), load_file(str(tuned / "translator.safetensors"))
    assert before.keys() == after.keys()
    # a small step from the start, not a fresh ridge fit: the trunks barely move (trunk_lr_scale)
    base = [k for k in before if k.endswith("k.base.weight")]
    assert all((after[k].float() - before[k].float()).abs().max() < 1e-2 for k in base)
    result = invoke(*train_args(tiny_models, text_corpus, tmp_path / "other", steps=1), "--experts", 2,
                    "--init", first / "translator")
    assert result.exit_code == 1 and "another shape (experts differ" in result.output
    result = invoke(*train_args(tiny_models, text_corpus, tmp_path / "r", kind="ridge"), "--init", first / "translator")
    assert result.exit_code == 1 and "kind ridge has no training" in result.output


def test_train_with_target_embeddings_and_ask_with_them(tiny_models, text_corpus, corpus, tmp_path, cag_home):
    out = tmp_path / "run"
    result = invoke(*train_args(tiny_models, text_corpus, out, kind="mot", steps=3), "--target-embeddings", 2,
                    "--source-layers", 1, "--token-rank", 8)
    assert result.exit_code == 0, result.output
    spec = json.loads((out / "translator.json").read_text())["spec"]
    assert spec["target_embeddings"] == 2 and spec["embedding_dim"] > 0 and spec["token_rank"] == 8
    assert all(len(pair) == 1 for pair in spec["layer_map"])  # each target layer reads one source layer
    assert json.loads((out / "config.json").read_text())["target_embeddings"] == 2
    store = tmp_path / "store"
    assert invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"],
                  "--chunk-tokens", 32).exit_code == 0
    answer = ask_json(store, tiny_models, "--mode", "translated")  # the installed translator reads them
    assert answer["mode"] == "translated" and answer["timings_ms"]["translate"] > 0


def test_a_run_from_before_a_setting_existed_or_after_one_was_removed_resumes(tiny_models, text_corpus, tmp_path):
    out = tmp_path / "run"
    plain = (*train_args(tiny_models, text_corpus, out, steps=2), "--target-embeddings", 0)
    assert invoke(*plain).exit_code == 0
    config = json.loads((out / "config.json").read_text())
    del config["target_embeddings"], config["token_rank"]  # as written before token embeddings (off then)
    config |= {"attention_dim": 0, "attention_heads": 4, "continuation": "text", "key_loss": "nmse"}  # removed since
    (out / "config.json").write_text(json.dumps(config))
    result = invoke(*plain)
    assert result.exit_code == 0, result.output
    result = invoke(*train_args(tiny_models, text_corpus, out, steps=2), "--target-embeddings", 1)
    assert result.exit_code == 1 and "another config" in result.output
    (out / "config.json").write_text(json.dumps({**config, "key_loss": "query"}))  # a removed feature was on
    result = invoke(*plain)
    assert result.exit_code == 1 and "key_loss='query', a setting this cag no longer has" in result.output


def test_bad_train_input(tiny_models, text_corpus, tmp_path):
    result = invoke(*train_args(tiny_models, text_corpus, tmp_path / "a", kind="linear"))
    assert result.exit_code == 1 and "Unknown translator kind 'linear'" in result.output
    result = invoke(*train_args(tiny_models, tmp_path / "missing.jsonl", tmp_path / "b"))
    assert result.exit_code == 1 and "does not exist" in result.output
    result = invoke(*train_args(tiny_models, text_corpus, tmp_path / "c"), "--device", "cuda:0")
    if not __import__("torch").cuda.is_available():
        assert result.exit_code == 1 and "torch sees no CUDA GPU" in result.output
    result = invoke(*train_args(tiny_models, text_corpus, tmp_path / "d"), "--mode", "window", "--window", "3")
    assert result.exit_code == 1 and "START:END" in result.output


@pytest.fixture
def trained_store(tiny_models, text_corpus, corpus, tmp_path):
    for kind in ("mot", "ridge"):
        result = invoke(*train_args(tiny_models, text_corpus, tmp_path / f"run-{kind}", kind=kind))
        assert result.exit_code == 0, result.output
    store = tmp_path / "store"
    result = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32)
    assert result.exit_code == 0, result.output
    return store


def ask_json(store, tiny_models, *extra):
    result = invoke("ask", "How long can the European lobster grow?", "--store", store, "--model",
                    tiny_models["generator"], "--json", "--max-new-tokens", 4, "--top-k", 2, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_ask_translated_end_to_end_and_reuses_translated_caches(trained_store, tiny_models):
    first = ask_json(trained_store, tiny_models, "--mode", "translated")
    assert first["mode"] == "translated" and first["context_tokens"] > 0
    assert first["timings_ms"]["translate"] > 0
    spaces = [json.loads(p.read_text()) for p in (trained_store / "caches").glob("*/model.json")]
    assert any(s["role"] == "translated" for s in spaces)
    again = ask_json(trained_store, tiny_models, "--mode", "translated")
    assert again["timings_ms"]["translate"] == 0  # stored translated caches reused
    assert again["answer"] == first["answer"]
    assert ask_json(trained_store, tiny_models, "--mode", "ridge")["mode"] == "ridge"
    window = ask_json(trained_store, tiny_models, "--mode", "translated-window")
    assert window["mode"] == "translated-window" and window["context_tokens"] == first["context_tokens"]
    assert window["timings_ms"]["translate"] == 0  # the stored MoT translations, replayed
    missing = invoke("ask", "Q?", "--store", trained_store, "--model", tiny_models["generator"], "--mode", "single")
    assert missing.exit_code == 1 and "no translator" in missing.output and "(single): train one" in missing.output


    def translated_files():
        return sorted((trained_store / "caches").glob("*/*/*.safetensors"))

    # `cag store prune`: translated caches are derived data; pruned, the next ask re-makes them
    def translated_spaces():
        return [s for s in json.loads(invoke("store", "info", "--store", trained_store, "--json").output)["cache_spaces"]
                if s["role"] == "translated"]
    assert len(translated_spaces()) == 2  # mot and ridge
    before = translated_files()
    dry = invoke("store", "prune", "--store", trained_store, "--model", tiny_models["generator"], "--dry-run")
    assert dry.exit_code == 0 and "Would free" in dry.output and translated_files() == before
    pruned = invoke("store", "prune", "--store", trained_store, "--model", tiny_models["generator"])
    assert pruned.exit_code == 0 and "Freed" in pruned.output and "from 2 cache space(s)" in pruned.output
    assert translated_spaces() == [] and len(translated_files()) < len(before)
    remade = ask_json(trained_store, tiny_models, "--mode", "translated")
    assert remade["timings_ms"]["translate"] > 0 and remade["answer"] == first["answer"]
    # a damaged stored translation is derived data: removed and translated again, not an error
    spaces = {p.parent.name: json.loads(p.read_text())["role"] for p in (trained_store / "caches").glob("*/model.json")}
    stored = [p for p in translated_files() if spaces[p.parent.parent.name] == "translated"]
    stored[0].write_bytes(stored[0].read_bytes()[:100])
    repaired = ask_json(trained_store, tiny_models, "--mode", "translated")
    assert repaired["timings_ms"]["translate"] > 0 and repaired["answer"] == first["answer"]
    for args, message in ((("--role", "encoder"), "never pruned"),
                          (("--model", "nobody"), "No translated caches for nobody"),
                          (("--role", "native"), "No native caches")):
        refused = invoke("store", "prune", "--store", trained_store, *args)
        assert refused.exit_code == 1 and message in refused.output, refused.output


def test_auto_mode_quality_gate(trained_store, tiny_models, cag_home):
    auto = ask_json(trained_store, tiny_models)
    assert auto["mode"] == "direct" and "no recorded QA retention" in " ".join(auto["notes"])
    record_path = next((cag_home / "translators").glob("*__mot.json"))
    record = json.loads(record_path.read_text())
    record["spec"]["metrics"]["qa"] = {"retention": 0.8}
    record_path.write_text(json.dumps(record))
    assert ask_json(trained_store, tiny_models)["mode"] == "translated"  # the default threshold: 0.75
    gated = ask_json(trained_store, tiny_models, "--min-retention", 0.9)
    assert gated["mode"] == "direct" and "below the 0.90 threshold" in " ".join(gated["notes"])
    # below the threshold in full mode, the recorded translated-blend setting may clear it
    record["spec"]["metrics"]["qa_blend"] = {"retention": 0.95, "blend": 0.3, "blend_select": "query"}
    record_path.write_text(json.dumps(record))
    blended = ask_json(trained_store, tiny_models, "--min-retention", 0.9)
    notes = " ".join(blended["notes"])
    assert blended["mode"] == "translated-blend" and "translated-blend 0.3 (query) keeps 0.95" in notes
    assert blended["timings_ms"]["blend"] > 0
    assert ask_json(trained_store, tiny_models)["mode"] == "translated"  # full mode clears 0.75: the faster one
    gated = ask_json(trained_store, tiny_models, "--min-retention", 0.97)
    assert gated["mode"] == "direct" and "translated-blend 0.3 (query) keeps 0.95" in " ".join(gated["notes"])
    # a setting recorded with a selection cag does not offer (an experiment's) is not used
    record["spec"]["metrics"]["qa_blend"]["blend_select"] = "deviation"
    record_path.write_text(json.dumps(record))
    gated = ask_json(trained_store, tiny_models, "--min-retention", 0.9)
    assert gated["mode"] == "direct" and "uses a selection this cag does not offer" in " ".join(gated["notes"])


def test_stale_translator_is_refused(trained_store, tiny_models, cag_home):
    record_path = next((cag_home / "translators").glob("*__mot.json"))
    record = json.loads(record_path.read_text())
    record["spec"]["target"]["fingerprint"] = "0" * 64
    record_path.write_text(json.dumps(record))
    result = invoke("ask", "Q?", "--store", trained_store, "--model", tiny_models["generator"], "--mode", "translated")
    assert result.exit_code == 1 and "fingerprint mismatch" in result.output


def test_a_translator_relabelled_for_another_pair_is_refused_by_shape(trained_store, tiny_models, cag_home):
    """The JSON of one translator put beside another's weights, or naming a generator of another
    shape: a one-line error saying the files do not belong together, not a failure deep inside."""
    record_path = next((cag_home / "translators").glob("*__mot.json"))
    record = json.loads(record_path.read_text())
    ask = ("ask", "Q?", "--store", trained_store, "--model", tiny_models["generator"], "--mode", "translated")
    shaped = json.loads(json.dumps(record))
    shaped["spec"]["target"]["geometry"]["num_layers"] += 1  # a generator with one more layer
    record_path.write_text(json.dumps(shaped))
    result = invoke(*ask)
    assert result.exit_code == 1 and "was made for a generator of another shape" in result.output
    assert "num_layers" in result.output
    other = json.loads(json.dumps(record))
    other["spec"]["experts"] += 1  # weights of a 4-expert translator under a 5-expert description
    record_path.write_text(json.dumps(other))
    result = invoke(*ask)
    assert result.exit_code == 1 and "do not fit the translator its JSON describes" in result.output


def test_eval_runs_translated_modes_and_adds_modes_to_a_run(trained_store, tiny_models, tmp_path):
    out = tmp_path / "eval"
    base = ["eval", "--dataset", SQUAD5, "--task", "extractive", "--model", tiny_models["generator"],
            "--encoder", tiny_models["encoder"], "--max-new-tokens", 3, "--out", out]
    first = invoke(*base, "--modes", "direct,none")
    assert first.exit_code == 0, first.output
    result = invoke(*base, "--modes", "direct,none,translated,ridge,single,translated-window", "--skip-missing",
                    "--window", "1:2")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["modes"]) == ["direct", "none", "translated", "ridge", "translated-window"]  # no single
    assert metrics["modes"]["translated"]["n"] == 5
    assert metrics["modes"]["translated"]["bytes_stored_per_context_token"] > 0
    records = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 25  # direct and none were not redone
    # translator modes compared pairwise on the same examples
    score = {(r["id"], r["mode"]): r["score"] for r in records}
    ids = {r["id"] for r in records}
    want = sum(score[(i, "translated")] - score[(i, "ridge")] for i in ids) / len(ids)
    diff = metrics["paired_differences"]["translated - ridge"]
    assert diff["n"] == 5 and diff["mean"] == round(want, 3) and diff["ci95"][0] <= diff["mean"] <= diff["ci95"][1]
    assert set(metrics["paired_differences"]) == {"translated - ridge", "translated - translated-window",
                                                  "ridge - translated-window"}
    # the same run without storing translations: the same answers, no translated caches on disk
    forgetful = tmp_path / "eval-no-keep"
    base[-1] = forgetful
    result = invoke(*base, "--modes", "direct,translated,translated-window", "--window", "1:2", "--no-keep-translated")
    assert result.exit_code == 0, result.output
    again = {(r["id"], r["mode"]): r for r in map(json.loads, (forgetful / "predictions.jsonl").read_text().splitlines())}
    kept = {(r["id"], r["mode"]): r for r in records}
    assert all(again[k]["prediction"] == kept[k]["prediction"] for k in again)
    assert all(again[(i, "translated-window")]["timings_ms"]["translate"] > 0 for i in ids)  # translated again
    spaces = [json.loads(p.read_text())["role"] for p in (forgetful / "store" / "caches").glob("*/model.json")]
    assert spaces == ["encoder"]


def test_blend_modes_in_ask_and_eval(trained_store, tiny_models, tmp_path):
    answer = ask_json(trained_store, tiny_models, "--mode", "translated-blend", "--blend", 0.3)
    assert answer["mode"] == "translated-blend" and answer["timings_ms"]["blend"] > 0
    offered = invoke("ask", "Q?", "--store", trained_store, "--blend-select", "random")  # experiments only
    assert offered.exit_code == 2 and "No such option" in offered.output
    refused = invoke("ask", "Q?", "--store", trained_store, "--model", tiny_models["generator"], "--mode", "native-blend")
    assert refused.exit_code == 1 and "No native caches" in refused.output  # this store has none
    out = tmp_path / "eval"
    base = ["eval", "--dataset", SQUAD5, "--task", "extractive", "--model", tiny_models["generator"],
            "--encoder", tiny_models["encoder"], "--max-new-tokens", 3, "--out", out, "--limit", 2]
    result = invoke(*base, "--modes", "direct,native,native-blend,translated,translated-blend", "--blend", 1.0)
    assert result.exit_code == 0, result.output
    records = {(r["id"], r["mode"]): r for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    for (i, mode), r in records.items():
        if mode.endswith("-blend"):  # every context token recomputed: the generator's own cache
            assert r["prediction"] == records[(i, "direct")]["prediction"] or r["chunks"] > 1
            assert "blend" in r["timings_ms"]  # choosing the tokens (none to choose at 1.0: all are recomputed)
    metrics = json.loads((out / "metrics.json").read_text())
    assert "translated - translated-blend" in metrics["paired_differences"]
    assert metrics["modes"]["native-blend"]["bytes_stored_per_context_token"] > 0
    changed = invoke(*base, "--modes", "direct,native-blend", "--blend", 0.5)
    assert changed.exit_code == 1 and "another config (blend: 1.0 there, 0.5 now)" in changed.output  # blend answers made


def test_qa_check_records_retention_for_the_gate(tiny_models, text_corpus, tmp_path, cag_home):
    out = tmp_path / "run"
    result = invoke(*train_args(tiny_models, text_corpus, out, kind="ridge"), "--qa-check", 2)
    assert result.exit_code == 0, result.output
    assert "QA check (2 SQuAD questions)" in result.output
    qa = json.loads((out / "translator.json").read_text())["spec"]["metrics"]["qa"]
    assert qa["questions"] == 2 and qa["dataset"] == "squad" and isinstance(qa["direct_f1"], float)
    installed = json.loads(next((cag_home / "translators").glob("*__ridge.json")).read_text())
    assert installed["spec"]["metrics"]["qa"] == qa
    metrics = json.loads((out / "qa-check" / "metrics.json").read_text())
    assert set(metrics["modes"]) == {"direct", "ridge"} and metrics["examples"] == 2
    refused = invoke(*train_args(tiny_models, text_corpus, tmp_path / "b"), "--qa-check", 2, "--no-install")
    assert refused.exit_code == 1 and "drop --no-install" in refused.output


def test_a_translator_kind_is_judged_by_its_full_mode():
    from cag.modes import modes
    from eval.qa_check import mode_for_kind, qa_record

    # mot is read by translated, translated-window and translated-blend: the gate takes `translated`
    assert {kind: mode_for_kind(kind) for kind in {m.translator_kind for m in modes() if m.translator_kind}} == \
        {"mot": "translated", "single": "single", "ridge": "ridge"}
    with pytest.raises(ValueError, match="not a valid TranslatorKind"):
        mode_for_kind("moe")
    modes = {"direct": {"f1": 40.0}, "translated": {"f1": 10.0, "retention": 0.25, "retention_ci95": [0.2, 0.3]},
             "translated-blend": {"f1": 30.0, "retention": 0.75, "retention_ci95": [0.7, 0.8]}}
    record = qa_record(modes, mode_for_kind("mot"), dataset="squad", questions=2, seed=7, run="runs/x")
    assert record == {"dataset": "squad", "questions": 2, "seed": 7, "direct_f1": 40.0, "f1": 10.0,
                      "retention": 0.25, "retention_ci95": [0.2, 0.3], "run": "runs/x"}


def test_recorded_runs_give_the_gate_its_full_and_blend_records():
    """eval.qa_check.qa_results (scripts/record_translator_qa.py) on a recorded run holding
    translated-blend: the MoT translator gets both its full-mode record and the blend setting auto
    may fall back to."""
    from eval.qa_check import qa_results
    root = Path(__file__).resolve().parents[2]
    run = root / "records" / "eval" / "squad-200-qwen2.5-coder-0.5b-blend30"
    metrics = json.loads((run / "metrics.json").read_text())["modes"]
    results = qa_results(run)
    assert results[("mot", "qa")]["retention"] == metrics["translated"]["retention"]
    blend = results[("mot", "qa_blend")]
    assert (blend["mode"], blend["blend"], blend["blend_select"]) == ("translated-blend", 0.3, "deviation")
    assert blend["retention"] == metrics["translated-blend"]["retention"] and blend["questions"] == 200


def test_a_compressed_store_keeps_its_translations_at_int8(tiny_models, text_corpus, corpus, tmp_path):
    """In an int4k-int3v store the encoder's caches are int4k-int3v, but the translations it keeps
    are int8 (cag.kv.serde.derived_cache_dtype): quantizing a translation again at 4 bits would make
    a later ask answer from a worse context than the first."""
    from safetensors import safe_open
    assert invoke(*train_args(tiny_models, text_corpus, tmp_path / "run")).exit_code == 0
    store = tmp_path / "store"
    result = invoke("ingest", corpus, "--store", store, "--encoder", tiny_models["encoder"], "--chunk-tokens", 32,
                    "--cache-dtype", "int4k-int3v")
    assert result.exit_code == 0, result.output
    first = ask_json(store, tiny_models, "--mode", "translated")
    assert first["timings_ms"]["translate"] > 0
    roles = {p.parent.name: json.loads(p.read_text())["role"] for p in (store / "caches").glob("*/model.json")}
    dtypes = {}
    for path in (store / "caches").glob("*/*/*.safetensors"):
        with safe_open(str(path), "pt") as f:
            dtypes.setdefault(roles[path.parent.parent.name], set()).add(f.metadata()["cag.dtype"])
    assert dtypes == {"encoder": {"int4k-int3v"}, "translated": {"int8"}}
    again = ask_json(store, tiny_models, "--mode", "translated")
    assert again["timings_ms"]["translate"] == 0 and again["answer"] == first["answer"]
