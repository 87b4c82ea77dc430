"""`cag eval` on small files with tiny models: run folder, resume after kill, bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cag.errors import CagError
from eval.runner import EvalConfig, run_eval

SQUAD5 = Path(__file__).parent / "squad5.jsonl"
runner = CliRunner()


def config(tiny_models, out, **extra):
    base = dict(dataset=str(SQUAD5), task="extractive", model=tiny_models["generator"],
                encoder=tiny_models["encoder"], max_new_tokens=4, out=str(out))
    return EvalConfig(**{**base, **extra})


def test_five_example_extractive_run_writes_every_output(tiny_models, tmp_path):
    run = run_eval(config(tiny_models, tmp_path / "run"))
    for name in ("config.json", "predictions.jsonl", "metrics.json", "report.md", "retention.png", "ttft.png"):
        assert (run / name).is_file(), name
    records = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 15 and {r["mode"] for r in records} == {"direct", "native", "none"}
    assert all(set(r) >= {"id", "mode", "prediction", "gold", "score", "context_tokens", "timings_ms"}
               for r in records)
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["modes"]) == {"direct", "native", "none"}
    for mode, m in metrics["modes"].items():
        assert m["n"] == 5 and "f1" in m and "em" in m and "retention_ci95" in m
        assert m["ttft_median_ms"] > 0
    assert metrics["modes"]["none"]["context_tokens_mean"] == 0
    assert metrics["modes"]["native"]["bytes_stored_per_context_token"] > 0
    # a one-chunk passage prefilled after the answer-time prefix: native answers equal direct
    by = {(r["id"], r["mode"]): r for r in records}
    single = [i for (i, mode), r in by.items() if mode == "direct" and r["chunks"] == 1]
    assert single and all(by[(i, "native")]["prediction"] == by[(i, "direct")]["prediction"] for i in single)


def test_multiple_choice_and_multi_doc(tiny_models, tmp_path):
    mc = tmp_path / "mc.jsonl"
    mc.write_text("\n".join(json.dumps({"id": f"q{i}", "context": "Paris is the capital of France." if i % 2 else "",
                                        "question": "What is the capital of France?",
                                        "choices": ["Paris", "Berlin", "Rome"], "answer_index": 0})
                            for i in range(4)) + "\n")
    run = run_eval(config(tiny_models, tmp_path / "mc_run", dataset=str(mc), task="multiple_choice",
                          option_score="sum"))
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["option_score"] == "sum" and metrics["modes"]["direct"]["n"] == 4
    record = json.loads((run / "predictions.jsonl").read_text().splitlines()[0])
    assert len(record["option_logprob_sum"]) == 3 and record["prediction"] in ["Paris", "Berlin", "Rome"]
    md = tmp_path / "md.jsonl"
    md.write_text(json.dumps({"id": "h1", "question": "Who wrote the report?", "answers": ["Ada"],
                              "documents": [{"title": f"T{i}", "text": f"Paragraph {i} about Ada and reports."}
                                            for i in range(6)]}) + "\n")
    run = run_eval(config(tiny_models, tmp_path / "md_run", dataset=str(md), task="multi_doc", top_k=2))
    records = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    direct = next(r for r in records if r["mode"] == "direct")
    budget = run_eval(config(tiny_models, tmp_path / "md_budget", dataset=str(md), task="multi_doc",
                             context_budget=10_000))
    all_paragraphs = next(json.loads(l) for l in (budget / "predictions.jsonl").read_text().splitlines())
    assert 0 < direct["context_tokens"] < all_paragraphs["context_tokens"]


def test_killed_eval_resumes_without_counting_twice(tiny_models, tmp_path, cag_home):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "cli", "eval", "--dataset", str(SQUAD5), "--task", "extractive",
            "--model", tiny_models["generator"], "--encoder", tiny_models["encoder"],
            "--max-new-tokens", "3", "--out", str(out)]
    env = {**os.environ, "CAG_HOME": str(cag_home), "HF_HUB_OFFLINE": "1", "CAG_FAULT": "prediction_written:7"}
    assert subprocess.run(args, env=env, capture_output=True).returncode == -9
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 7
    with open(out / "predictions.jsonl", "a") as handle:
        handle.write('{"id": "torn')  # as if killed in the middle of a write
    env.pop("CAG_FAULT")
    resumed = subprocess.run(args, env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-800:]
    records = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    keys = [(r["id"], r["mode"]) for r in records]
    assert len(keys) == len(set(keys)) == 15


@pytest.mark.parametrize("args,message", [
    (["--dataset", "missing.jsonl", "--task", "extractive"], "neither a file nor a preset"),
    (["--dataset", str(SQUAD5), "--task", "summarize"], "Unknown task 'summarize'"),
    (["--dataset", str(SQUAD5), "--task", "extractive", "--modes", "direct,fast"], "Unknown mode(s) fast"),
    (["--dataset", str(SQUAD5), "--task", "extractive", "--modes", "direct,translated", "--encoder", "ENC",
      "--model", "GEN"], "Mode translated cannot run: no translator"),
    (["--dataset", str(SQUAD5), "--task", "multiple_choice"], "line 1: missing field 'choices'"),
    (["--dataset", "squad", "--task", "multi_doc"], "is a extractive dataset"),
    (["--dataset", str(SQUAD5), "--task", "extractive", "--dtype", "int8"], "Unknown dtype 'int8'"),
])
def test_bad_input_is_one_line_exit_1(args, message, tmp_path, tiny_models):
    # tiny models: the shipped translators (for the packaged models) must not match them
    args = [{"ENC": tiny_models["encoder"], "GEN": tiny_models["generator"]}.get(a, a) for a in args]
    result = runner.invoke(app, ["eval", *args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and message in result.output, result.output


def test_wrong_field_type_names_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SQUAD5.read_text().splitlines()[0] + "\n" +
                   json.dumps({"id": "x", "context": "c", "question": "q", "answers": "not a list"}) + "\n")
    result = runner.invoke(app, ["eval", "--dataset", str(bad), "--task", "extractive"])
    assert result.exit_code == 1 and "line 2: field 'answers' must be list" in result.output


def test_bf16_generator_run_records_its_dtype_and_resumes_runs_from_before_the_option(tiny_models, tmp_path):
    run = run_eval(config(tiny_models, tmp_path / "bf16", dtype="bf16", limit=2))
    assert json.loads((run / "config.json").read_text())["dtype"] == "bf16"
    assert json.loads((run / "metrics.json").read_text())["dtype"] == "bf16"
    assert "generator dtype bf16" in (run / "report.md").read_text()
    # a run folder written before --dtype existed has no dtype key: it was fp32 and resumes as fp32
    old = run_eval(config(tiny_models, tmp_path / "old", limit=2))
    saved = json.loads((old / "config.json").read_text())
    saved.pop("dtype")
    (old / "config.json").write_text(json.dumps(saved))
    run_eval(config(tiny_models, tmp_path / "old", limit=2, modes=("direct", "none")))
    # a rerun with fewer modes keeps reporting the modes the folder already holds
    assert json.loads((old / "config.json").read_text())["modes"] == ["direct", "native", "none"]
    assert json.loads((old / "metrics.json").read_text())["modes"]["native"]["n"] == 2
    with pytest.raises(CagError, match="another config \\(dtype: 'fp32' there, 'bf16' now\\)"):
        run_eval(config(tiny_models, tmp_path / "old", limit=2, dtype="bf16"))


def test_a_larger_limit_extends_a_run_and_keeps_the_answers_made(tiny_models, tmp_path):
    run = run_eval(config(tiny_models, tmp_path / "run", limit=2))
    first = (run / "predictions.jsonl").read_text()
    run_eval(config(tiny_models, tmp_path / "run", limit=4))
    records = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    # the first two examples' answers are the bytes written before; only the new ones were answered
    assert (run / "predictions.jsonl").read_text().startswith(first)
    assert len(records) == 12 and len({r["id"] for r in records}) == 4
    # the same four examples a fresh --limit 4 run samples
    fresh = run_eval(config(tiny_models, tmp_path / "fresh", limit=4))
    fresh_ids = {json.loads(l)["id"] for l in (fresh / "predictions.jsonl").read_text().splitlines()}
    assert {r["id"] for r in records} == fresh_ids
    assert json.loads((run / "config.json").read_text())["limit"] == 4
    assert json.loads((run / "metrics.json").read_text())["modes"]["direct"]["n"] == 4
    with pytest.raises(CagError, match="another config \\(limit: 4 there, 3 now\\)"):
        run_eval(config(tiny_models, tmp_path / "run", limit=3))


def test_a_moved_run_follows_its_passages_without_ingesting_twice(tiny_models, tmp_path):
    import shutil
    from cag.store import Store
    first = run_eval(config(tiny_models, tmp_path / "a", limit=2))
    caches = sorted(p.name for p in (first / "store" / "caches").rglob("*.safetensors"))
    before = json.loads((first / "metrics.json").read_text())
    moved = tmp_path / "b"
    shutil.move(first, moved)
    run_eval(config(tiny_models, moved, limit=2, modes=("direct", "native", "none")))
    store = Store.open(moved / "store")
    assert store.catalog.paths() == [str((moved / "contexts" / "passages.jsonl").resolve())]
    store.close()
    assert sorted(p.name for p in (moved / "store" / "caches").rglob("*.safetensors")) == caches
    after = json.loads((moved / "metrics.json").read_text())
    assert after["modes"]["native"]["bytes_stored_per_context_token"] == \
        before["modes"]["native"]["bytes_stored_per_context_token"]


def test_generator_that_is_the_encoder_reports_the_bytes_it_reads(tiny_models, tmp_path):
    run = run_eval(config(tiny_models, tmp_path / "same", limit=2, model=tiny_models["encoder"]))
    metrics = json.loads((run / "metrics.json").read_text())
    native = metrics["modes"]["native"]["bytes_stored_per_context_token"]
    assert native > 0 and native == metrics["encoder_cache_bytes_per_token"]


def test_a_run_links_the_caches_another_run_holds(tiny_models, tmp_path):
    first = run_eval(config(tiny_models, tmp_path / "first", modes=("direct", "native")))
    # the same passages, another run: every native cache is a hard link to the first run's file
    second = run_eval(config(tiny_models, tmp_path / "second", modes=("direct", "native"), max_new_tokens=3,
                             reuse_caches=(str(first),)))
    def caches(run):
        return {p.relative_to(run / "store"): p.stat() for p in (run / "store" / "caches").glob("*/*/*.safetensors")}
    mine, theirs = caches(second), caches(first)
    assert mine and set(mine) == set(theirs)
    assert all(mine[p].st_ino == theirs[p].st_ino for p in mine)
    answers = lambda run: {(r["id"], r["mode"]): r["prediction"] for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    assert len(answers(second)) == 10
    assert json.loads((second / "config.json").read_text())["reuse_caches"] == [str(first)]
    # resuming without the option is the same run (where caches came from is not its identity)
    assert run_eval(config(tiny_models, tmp_path / "second", modes=("direct", "native"), max_new_tokens=3)) == second
    with pytest.raises(CagError, match="not a cag store"):
        run_eval(config(tiny_models, tmp_path / "third", reuse_caches=(str(tmp_path / "nothing"),)))


def test_a_run_started_with_a_mode_and_a_setting_since_removed_resumes_without_them(tiny_models, tmp_path):
    # a folder from a cag that had the scaled modes: its context_scale and native-scaled answers
    # shape nothing this cag answers, so the run goes on and the report leaves that mode out
    run = run_eval(config(tiny_models, tmp_path / "run", modes=("direct", "native")))
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**saved, "context_scale": 0.25,
                                                 "modes": saved["modes"] + ["native-scaled"]}))
    assert run_eval(config(tiny_models, tmp_path / "run", modes=("direct", "native", "none"))) == run
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["modes"]) == {"direct", "native", "none"}


def test_a_shared_corpus_puts_every_passage_in_one_store_and_reports_recall(tiny_models, tmp_path):
    distractors = tmp_path / "distractors"
    distractors.mkdir()
    (distractors / "noise.txt").write_text("An unrelated note about tides and harbours. " * 4)
    run = run_eval(config(tiny_models, tmp_path / "run", limit=2, top_k=2, corpus="shared",
                          distractors=str(distractors)))
    from cag.store import Store
    store = Store.open(run / "store")
    assert store.catalog.counts()["documents"] == 6  # all 5 passages of the dataset (2 sampled) + the distractor
    store.close()
    records = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    by_id = {}
    for r in records:
        assert 1 <= len(r["retrieved"]) <= 2 and isinstance(r["gold_all"], bool)
        by_id.setdefault(r["id"], set()).add((tuple(r["retrieved"]), r["gold_all"]))
    assert len(by_id) == 2 and all(len(v) == 1 for v in by_id.values())  # every mode read the same chunks
    metrics = json.loads((run / "metrics.json").read_text())
    hits = [next(iter(v))[1] for v in by_id.values()]
    assert metrics["retrieval"]["recall_at_k"] == round(sum(hits) / 2, 3) and metrics["retrieval"]["k"] == 2
    assert "one store of every passage" in metrics["setting"] and "recall@2" in (run / "report.md").read_text()
    # the same run resumes; another corpus is another run
    assert run_eval(config(tiny_models, tmp_path / "run", limit=2, top_k=2, corpus="shared",
                           distractors=str(distractors))) == run
    with pytest.raises(CagError, match="corpus"):
        run_eval(config(tiny_models, tmp_path / "run", limit=2, top_k=2))
    with pytest.raises(CagError, match="--distractors"):
        config(tiny_models, tmp_path / "x", distractors=str(distractors))


def test_multi_doc_retrieval_among_an_examples_own_paragraphs_records_its_supporting_ones(tiny_models, tmp_path):
    md = tmp_path / "md.jsonl"
    md.write_text(json.dumps({"id": "h1", "question": "Who wrote the report?", "answers": ["Ada"],
                              "supporting_titles": ["T1", "T4"],
                              "documents": [{"title": f"T{i}", "text": f"Paragraph {i} about Ada and reports."}
                                            for i in range(6)]}) + "\n")
    run = run_eval(config(tiny_models, tmp_path / "run", dataset=str(md), task="multi_doc", top_k=6))
    record = json.loads((run / "predictions.jsonl").read_text().splitlines()[0])
    assert record["gold_all"] is True and len(record["retrieved"]) == 6  # every paragraph: both gold ones
    assert json.loads((run / "metrics.json").read_text())["retrieval"]["recall_at_k"] == 1.0


def test_the_llamaindex_baseline_answers_from_its_own_index_over_the_same_chunks(tiny_models, tmp_path):
    run = run_eval(config(tiny_models, tmp_path / "run", limit=3, top_k=2, corpus="shared", llamaindex=True,
                          modes=("direct", "none")))
    records = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    baseline = {r["id"]: r for r in records if r["mode"] == "llamaindex"}
    direct = {r["id"]: r for r in records if r["mode"] == "direct"}
    assert set(baseline) == set(direct) and len(baseline) == 3
    for qid, record in baseline.items():
        assert record["chunks"] == 2 and isinstance(record["prediction"], str) and 0 <= record["score"] <= 100
        # llama-index's own similarity search over the same embeddings finds cag's FAISS top-k
        assert record["retrieved"] == direct[qid]["retrieved"] and record["gold_all"] == direct[qid]["gold_all"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["modes"]["llamaindex"]["n"] == 3 and "retention" in metrics["modes"]["llamaindex"]
    gap = metrics["paired_differences"]["llamaindex - direct"]  # beside cag's text RAG, on the same questions
    assert gap["n"] == 3 and gap["mean"] == round(sum(baseline[q]["score"] - direct[q]["score"] for q in direct) / 3, 3)
    assert json.loads((run / "config.json").read_text())["modes"] == ["direct", "none", "llamaindex"]
    with pytest.raises(CagError, match="--corpus shared"):
        config(tiny_models, tmp_path / "x", llamaindex=True)


def test_auto_answers_as_ask_would_and_records_each_pick(tiny_models, tmp_path):
    run = run_eval(config(tiny_models, tmp_path / "run", modes=("direct", "native", "auto")))
    records = [json.loads(l) for l in (run / "predictions.jsonl").read_text().splitlines()]
    by = {(r["id"], r["mode"]): r for r in records}
    auto = [r for r in records if r["mode"] == "auto"]
    # every chunk has the generator's own cache: auto reads them, and answers exactly as native
    assert len(auto) == 5 and all(r["picked"] == "native" and "own stored caches" in r["pick"] for r in auto)
    assert all((r["prediction"], r["context_tokens"]) == (by[(r["id"], "native")]["prediction"],
                                                          by[(r["id"], "native")]["context_tokens"]) for r in auto)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["auto_picks"] == {"native": 5} and metrics["modes"]["auto"]["n"] == 5
    assert "Mode auto answered in: native (5)" in (run / "report.md").read_text()
