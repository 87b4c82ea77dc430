"""Translator shapes on all five families, injection exactness, training, checkpoints, refusals."""

import json

import pytest
import torch

from cag.errors import CagError
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk, run_prefill
from cag.prompt import prompt_layout
from tests.tiny_models import tiny_lm
from mot.checkpoint import load_translator, read_record, save_translator
from mot.training.data import make_windows, prepare_window
from mot.injection import full_cache, window_cache
from mot.training.ridge import RidgeFit
from mot.training.step import chunk_weights, run_window
from mot.registry import SHIPPED as SHIPPED_DIR
from mot.translator import Translator, make_spec, translate_chunk

FAMILIES = ("gpt2", "opt", "llama", "qwen2", "gemma3")
TEXT = "The European lobster may grow to 60 cm. It is blue in life and red after cooking."


@pytest.mark.parametrize("source_family,target_family",
                         [("llama", f) for f in FAMILIES] + [(f, "qwen2") for f in FAMILIES if f != "llama"])
def test_translated_chunk_has_the_native_shape(source_family, target_family):
    source, target = tiny_lm(source_family, seed=1), tiny_lm(target_family, seed=2)
    prefix = prompt_layout(target.tokenizer).prefix_ids
    chunk = prefill_chunk(source, TEXT, prompt_layout(source.tokenizer).prefix_ids)
    for kind in ("mot", "single", "ridge"):
        translator = Translator(make_spec(kind, source, target))
        out = translate_chunk(translator, chunk, target, prefix)
        native = prefill_chunk(target, TEXT, prefix)
        assert len(out.keys) == len(native.keys) == target.geometry.num_layers
        assert [k.shape for k in out.keys] == [k.shape for k in native.keys]
        assert [v.shape for v in out.values] == [v.shape for v in native.values]
        assert torch.equal(out.token_ids, native.token_ids)
        assert out.meta.model_fingerprint == target.fingerprint
        assert out.meta.rotary_removed == target.geometry.is_rotary
        # the translated chunk assembles like a native one (positions, sliding windows, offsets)
        context = assemble(target, [out], prefix)
        assert context.length == len(prefix) + native.num_tokens


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2"])
def test_injecting_native_kv_reproduces_the_native_run(family):
    """full and window injection of the generator's *own* chunk K/V give the direct logits."""
    lm = tiny_lm(family, seed=4)
    prefix = list(prompt_layout(lm.tokenizer).prefix_ids)
    native = prefill_chunk(lm, TEXT, prefix)
    cont = torch.tensor(lm.tokenizer(" and more text", add_special_tokens=False)["input_ids"])
    ids = torch.cat([torch.tensor(prefix), native.token_ids, cont])
    with torch.no_grad():
        direct = lm.model(input_ids=ids[None]).logits[0, -cont.numel():]
        prefix_kv = run_prefill(lm.model, torch.tensor(prefix), torch.arange(len(prefix)))
        n, ctx = len(prefix), native.num_tokens
        cache = full_cache(lm, prefix_kv, native.keys, native.values, n)
        full = lm.model(input_ids=cont[None], position_ids=torch.arange(n + ctx, n + ctx + cont.numel())[None],
                        cache=cache).logits[0]
        cache = window_cache(lm, prefix_kv, native.keys, native.values, n, (0, lm.geometry.num_layers))
        both = torch.cat([native.token_ids, cont])
        window = lm.model(input_ids=both[None], position_ids=torch.arange(n, n + both.numel())[None],
                          cache=cache).logits[0, -cont.numel():]
    assert torch.allclose(full, direct, atol=1e-4)
    assert torch.allclose(window, direct, atol=1e-4)


def _prepared_pair(windows=4):
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    for p in target.model.parameters():
        p.requires_grad_(False)
    paragraphs = [TEXT * 3 + f" Paragraph {i} is about lobsters number {i * 7}." for i in range(windows)]
    texts = make_windows(paragraphs, source.tokenizer, windows, chunk_tokens=16, chunks=2, continuation_tokens=8)
    sp, tp = prompt_layout(source.tokenizer).prefix_ids, prompt_layout(target.tokenizer).prefix_ids
    data = [prepare_window(t, source, target, sp, tp, top_k=8) for t in texts]
    prefix_kv = run_prefill(target.model, torch.tensor(tp), torch.arange(len(tp))) if tp else None
    return source, target, data, prefix_kv, len(tp)


def test_ridge_start_then_training_lowers_the_loss():
    source, target, data, prefix_kv, n = _prepared_pair()
    torch.manual_seed(0)
    translator = Translator(make_spec("mot", source, target))

    def loss():
        total = 0.0
        for w in data:
            r = run_window(translator, target, prefix_kv, n, w)
            total = total + r.reconstruction + r.kl + 0.5 * r.continuation_kv
        return total / len(data)

    with torch.no_grad():
        random_init = float(loss())
    fit = RidgeFit(translator)
    for w in data:
        pos = n
        for c in w.chunks:
            weights, _ = chunk_weights(c)
            fit.add(c.src_keys, c.src_values, weights, c.tgt_keys, c.tgt_values)
            pos += c.tgt_ids.numel()
    fit.solve()
    with torch.no_grad():
        ridge = float(loss())
    assert ridge < random_init  # the closed form is a better start than random weights
    optimizer = torch.optim.AdamW(translator.parameters(), lr=3e-3)
    for _ in range(15):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    with torch.no_grad():
        trained = float(loss())
    assert trained < ridge


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path):
    source, target = tiny_lm("llama", seed=1), tiny_lm("gemma3", seed=2)
    torch.manual_seed(0)
    translator = Translator(make_spec("mot", source, target))
    for p in translator.parameters():  # non-trivial weights everywhere (down starts at zero)
        p.data.normal_(0, 0.1)
    chunk = prefill_chunk(source, TEXT, ())
    before = translate_chunk(translator, chunk, target)
    path = save_translator(translator, tmp_path / "t", dtype="fp32")
    loaded = load_translator(path)
    after = translate_chunk(loaded, chunk, target)
    assert all(torch.equal(a, b) for a, b in zip(before.keys + before.values, after.keys + after.values))
    assert loaded.fingerprint() == translator.fingerprint() == read_record(path)["fingerprint"]
    # fp16 storage (the shipped default): equal to the fp16-rounded translator
    path16 = save_translator(translator, tmp_path / "t16")
    rounded = load_translator(path16)
    assert rounded.fingerprint() != translator.fingerprint()
    assert read_record(path16)["spec"]["target"]["fingerprint"] == target.fingerprint
    # a flipped byte in the weights is detected
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CagError, match="do not match their record"):
        load_translator(path)


def test_int8_storage_halves_the_file_and_stays_close(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    torch.manual_seed(0)
    translator = Translator(make_spec("mot", source, target, target_embeddings=2, token_rank=16))
    for p in translator.parameters():
        p.data.normal_(0, 0.1)
    chunk = prefill_chunk(source, TEXT, ())
    want = translate_chunk(translator, chunk, target)
    path16 = save_translator(translator, tmp_path / "t16")
    path8 = save_translator(translator, tmp_path / "t8", dtype="int8")
    assert path8.stat().st_size < 0.6 * path16.stat().st_size
    loaded = load_translator(path8)
    assert loaded.fingerprint() == read_record(path8)["fingerprint"] and read_record(path8)["weights_dtype"] == "int8"
    got = translate_chunk(loaded, chunk, target)
    for a, b in zip(want.keys + want.values, got.keys + got.values):
        assert float((a - b).norm() / a.norm()) < 0.03  # per-row int8: about 0.5% per weight
    # the conversion script re-saves a checkpoint with its spec and metrics unchanged
    root = Path(__file__).resolve().parents[2]
    converted = tmp_path / "converted"
    done = subprocess.run([sys.executable, str(root / "scripts" / "convert_translator.py"), str(path16),
                           str(converted), "--dtype", "int8"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert read_record(converted)["spec"] == read_record(path16)["spec"]
    assert read_record(converted)["weights_dtype"] == "int8"
    with pytest.raises(CagError, match="Unknown translator weight dtype"):
        save_translator(translator, tmp_path / "bad", dtype="int4")


def test_fingerprint_mismatches_are_refused():
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    translator = Translator(make_spec("ridge", source, target))
    chunk = prefill_chunk(source, TEXT, ())
    other_target = tiny_lm("qwen2", seed=9)
    with pytest.raises(CagError, match="retrain it"):
        translate_chunk(translator, chunk, other_target)
    other_source_chunk = prefill_chunk(tiny_lm("llama", seed=5), TEXT, ())
    with pytest.raises(CagError, match="re-ingest with that encoder"):
        translate_chunk(translator, other_source_chunk, target)


def test_install_and_find_with_dotted_model_names(tmp_path, cag_home):
    from cag.translations import TranslationId, TranslatorKind
    from mot.registry import find_translator, install
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    translator = Translator(make_spec("ridge", source, target))
    checkpoint = save_translator(translator, tmp_path / "run" / "translator")
    for kind_name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):  # must not overwrite each other
        install(checkpoint, TranslationId("smollm2-135m", kind_name, TranslatorKind.RIDGE))
    names = sorted(p.name for p in (cag_home / "translators").iterdir())
    assert names == ["smollm2-135m__qwen2.5-coder-0.5b__ridge.json", "smollm2-135m__qwen2.5-coder-0.5b__ridge.safetensors",
                     "smollm2-135m__qwen2.5-coder-1.5b__ridge.json", "smollm2-135m__qwen2.5-coder-1.5b__ridge.safetensors"]
    found = find_translator(source.fingerprint, target.fingerprint, TranslationId("a", "b", TranslatorKind.RIDGE))
    assert found.path is not None and found.path.name.endswith("__ridge.safetensors") and found.path.is_file()
    assert load_translator(found.path).fingerprint() == load_translator(checkpoint).fingerprint()
    missing = find_translator(source.fingerprint, target.fingerprint, TranslationId("a", "b", TranslatorKind.MOT))
    assert missing.path is None and "no translator a -> b (mot)" in missing.reason


DEFAULT_SET_UP = [SHIPPED_DIR / f"{stem}.safetensors" for stem in
                  ("smollm2-135m__qwen2.5-coder-0.5b__mot", "smollm2-135m__gemma3-270m__mot")]


@pytest.mark.parametrize("path", DEFAULT_SET_UP, ids=lambda p: p.stem)
def test_shipped_translators_keep_their_recorded_fingerprints(path):
    """Loading must give the fingerprint recorded when they were saved (translated caches in users'
    stores are named by it): their JSON holds the retired chunk-attention fields at off, which must
    not change who they are."""
    record = json.loads(path.with_name(path.name[:-len(".safetensors")] + ".json").read_text())
    assert record["spec"]["attention_dim"] == 0
    assert load_translator(path).fingerprint() == record["fingerprint"]


def test_a_checkpoint_that_used_a_retired_feature_is_refused(tmp_path):
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    path = save_translator(Translator(make_spec("mot", source, target)), tmp_path / "t", dtype="fp32")
    record_path = tmp_path / "t.json"
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "spec": {**record["spec"], "attention_dim": 0, "attention_heads": 4}}))
    assert load_translator(path).fingerprint() == record["fingerprint"]  # at off: the same translator
    record_path.write_text(json.dumps({**record, "spec": {**record["spec"], "attention_dim": 16}}))
    with pytest.raises(CagError, match="attention_dim, a feature this cag no longer has"):
        load_translator(path)
