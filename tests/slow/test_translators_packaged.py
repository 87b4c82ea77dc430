"""MoT with the packaged models (slow): alignment on the three real tokenizers, the translators'
budgets and fingerprints (those in translators/, and those that left it, put back from git history
by scripts/translators_extra.py), and `ask --mode translated` end to end with them."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from cag.ask import ask
from cag.ingest.pipeline import IngestOptions, ingest
from cag.kv.chunk_cache import prefill_chunk, tokenize_chunk
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store
from cag.prompt import prompt_layout
from mot.alignment import align
from mot.batched import translate_layers
from cag.translations import TranslationId
from mot.checkpoint import load_translator, read_record
from mot.registry import SHIPPED, find_translator
from mot.token_features import embedding_table, token_features

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "corpus"
MODELS = ("smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m")
TEXTS = ["The European lobster may grow to 60 cm (24 in) long — and weigh 6 kg.",
         "  Leading spaces,\ttabs\nand new lines; “quotes”, naïve café, 東京 and 1,234.5 numbers.",
         (SAMPLES / "homarus_gammarus.md").read_text()[:3000]]


@pytest.fixture(scope="module")
def models(real_cag_home):
    import os
    os.environ["CAG_HOME"] = real_cag_home
    return {name: load_model(name) for name in MODELS}


@pytest.mark.parametrize("source,target", [(a, b) for a in MODELS for b in MODELS if a != b])
def test_alignment_on_real_tokenizers(models, source, target):
    for text in TEXTS:
        _, s_off = tokenize_chunk(models[source].tokenizer, text)
        _, t_off = tokenize_chunk(models[target].tokenizer, text)
        a = align(text, t_off, s_off)
        assert a.weights.shape == (t_off.shape[0], s_off.shape[0])
        assert (a.weights.sum(1) - 1).abs().max() < 1e-5  # each target token's weights sum to 1
        # spans cover the text: every non-space character lies in some token of each tokenization
        for offsets in (s_off, t_off):
            covered = set()
            for start, end in offsets.tolist():
                covered.update(range(start, end))
            assert all(i in covered for i, c in enumerate(text) if not c.isspace())
        assert a.nearest <= 0.05 * t_off.shape[0]  # few tokens without any overlap
        print(f"{source} -> {target}: {s_off.shape[0]} / {t_off.shape[0]} tokens, {a.nearest} nearest-only")


SHIPPED_PAIRS = [("smollm2-135m", target, "mot") for target in ("qwen2.5-coder-0.5b", "gemma3-270m")]
EXTRA_PAIRS = [("smollm2-135m", target, kind) for target in ("qwen2.5-coder-0.5b", "gemma3-270m")
               for kind in ("single", "ridge")] + [("qwen2.5-coder-0.5b", target, "mot")
                                                   for target in ("gemma3-270m", "smollm2-135m")]


@pytest.fixture(scope="module")
def extra_home(real_cag_home):
    """$CAG_HOME/translators of the slow tests, holding the translators that left translators/:
    installed there already (e.g. retrained), else put back from this clone's git history."""
    spec = importlib.util.spec_from_file_location(
        "translators_extra", Path(__file__).resolve().parents[2] / "scripts" / "translators_extra.py")
    extra = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extra)
    folder = Path(real_cag_home) / "translators"
    for name in extra.extra_names():
        if (folder / f"{name}.safetensors").is_file():
            continue
        found = extra.weights_from_history(name, extra.read_extra(name))
        if found is None:
            pytest.fail(f"{name} is not in this clone's history: `CAG_HOME={real_cag_home} make "
                        "translators-extra RETRAIN=1` trains it again (long), or use a full clone")
        extra.install(name, found[1], home=Path(real_cag_home))
    return folder


@pytest.mark.parametrize("source_name,target,kind", SHIPPED_PAIRS + EXTRA_PAIRS)
def test_translators_match_the_models_and_budgets(models, extra_home, source_name, target, kind, monkeypatch):
    monkeypatch.setenv("CAG_HOME", str(extra_home.parent))  # not the test's own empty home
    found = find_translator(models[source_name].fingerprint, models[target].fingerprint,
                            TranslationId(source_name, target, kind))
    where = SHIPPED if (source_name, target, kind) in SHIPPED_PAIRS else extra_home
    assert found.path is not None and found.path.parent == where, found.reason
    assert found.path.stat().st_size < 25 * 2 ** 20
    translator = load_translator(found.path)  # its weights' sha256 checked against the record
    assert translator.fingerprint() == read_record(found.path)["fingerprint"]
    generator_parameters = sum(p.numel() for p in models[target].model.parameters())
    assert translator.parameter_count() < 0.10 * generator_parameters
    # the batched inference path (bf16 where native) gives the training path's translation
    source = models[source_name]
    chunk = prefill_chunk(source, TEXTS[2], prompt_layout(source.tokenizer).prefix_ids)
    t_ids, t_offsets = tokenize_chunk(models[target].tokenizer, TEXTS[2])
    weights = align(TEXTS[2], t_offsets, chunk.offsets).weights
    positions = torch.arange(5, 5 + weights.shape[0])
    embeddings = translator.spec.target_embeddings  # the shipped ones read the target's token embeddings
    tokens = token_features(embedding_table(models[target]), t_ids, embeddings) if embeddings else None
    with torch.no_grad():
        want_k, want_v, _ = translator(chunk.keys, chunk.values, weights, positions, tokens)
    # bf16 rounds relative to magnitude; qwen2.5's caches carry key channels in the hundreds, so its
    # translations' bf16 error is larger (2.3e-4 measured; the QA records were made in bf16)
    bf16_bound = 5e-4 if source_name.startswith("qwen") else 1e-4
    for dtype, bound in ((torch.float32, 1e-9), (torch.bfloat16, bf16_bound)):
        got_k, got_v = translate_layers(translator, chunk.keys, chunk.values, weights, positions, dtype, tokens=tokens)
        error = sum(float((g - w).pow(2).sum()) for g, w in zip(got_k + got_v, want_k + want_v))
        assert error / sum(float(w.pow(2).sum()) for w in want_k + want_v) < bound, dtype


def test_ask_translated_with_the_shipped_translator(models, tmp_path):
    store = tmp_path / "store"
    ingest([SAMPLES], store, IngestOptions())
    lm = models["qwen2.5-coder-0.5b"]
    retriever = Retriever(Store.open(store))
    question = "How long can the European lobster grow?"
    translated = ask(question, top_k=1, mode="translated", max_new_tokens=24, lm=lm, retriever=retriever)
    direct = ask(question, top_k=1, mode="direct", max_new_tokens=24, lm=lm, retriever=retriever)
    print(f"translated: {translated.answer!r} ({translated.timings_ms['ttft']:.0f} ms) | "
          f"direct: {direct.answer!r} ({direct.timings_ms['ttft']:.0f} ms)")
    assert translated.mode == "translated" and translated.answer
    assert translated.context_tokens == direct.context_tokens
    assert translated.timings_ms["translate"] > 0


@pytest.mark.parametrize("name", sorted(p.name[:-len(".safetensors")] for p in SHIPPED.glob("*.safetensors")))
def test_every_shipped_translator_keeps_its_recorded_fingerprint(name):
    """The weights of every shipped translator (the default tests read the default set-up's alone)
    load into the fingerprint their record holds; no model needed."""
    path = SHIPPED / f"{name}.safetensors"
    assert load_translator(path).fingerprint() == read_record(path)["fingerprint"]


def test_the_extra_translators_keep_their_recorded_fingerprints(extra_home):
    """Those put back from history are the recorded ones (retrained ones carry their own record);
    the single paths' records predate chunk attention and token embeddings, and those absent spec
    fields must not change who they are."""
    recorded = Path(__file__).resolve().parents[2] / "records" / "translators"
    for path in sorted(extra_home.glob("*.safetensors")):
        record = read_record(path)
        original = json.loads((recorded / f"{path.name[:-len('.safetensors')]}.json").read_text())
        if record["weights_sha256"] == original["weights_sha256"] and record["spec"]["kind"] == "single":
            assert "attention_dim" not in record["spec"] and "target_embeddings" not in record["spec"]
        assert load_translator(path).fingerprint() == record["fingerprint"], path.name
