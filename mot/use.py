"""Translated contexts for ask and eval: the encoder's stored chunk caches, translated into the
generator's space (persisted per generator and translator the first time), then assembled."""

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from cag.ask import TRANSLATOR_KIND
from cag.errors import CagError
from cag.kv.chunk_cache import ids_sha256
from cag.kv.serde import save_chunk_cache
from cag.store.store import CacheSpace, Store
from mot.checkpoint import load_translator
from mot.registry import find_translator
from mot.translator import translate_chunk

log = logging.getLogger(__name__)
_LOADED: dict = {}  # (path, mtime) -> Translator


def encoder_space(store: Store) -> CacheSpace:
    for space in store.spaces():
        if space.role == "encoder" and space.model_fingerprint == store.config.encoder_fingerprint:
            return space
    raise CagError(f"Store {store.folder} holds no encoder caches; re-ingest it.")


def translator_for(store: Store, lm, mode: str):
    """The translator for `mode` (translated / single / ridge) from the store's encoder to `lm`."""
    kind = TRANSLATOR_KIND[mode]
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, kind,
                            store.config.encoder, lm.name)
    if found.path is None:
        raise CagError(f"Cannot answer in mode {mode}: {found.reason}.")
    key = (str(found.path), found.path.stat().st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = load_translator(found.path)
    return _LOADED[key]


@dataclass
class GateDecision:
    """What --mode auto may use of the MoT translator: `mode` translated, translated-blend (with
    the recorded `blend` share and `blend_select`) or None (fall back to direct), and why."""

    mode: str | None
    why: str
    blend: float | None = None
    blend_select: str | None = None


def gate(store: Store, lm, min_retention: float) -> GateDecision:
    """The fastest use of the MoT translator whose recorded QA retention clears `min_retention`:
    full translation (`metrics.qa`), else the translated-blend setting recorded beside it
    (`metrics.qa_blend`, which recomputes a share of the tokens), else none."""
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, "mot",
                            store.config.encoder, lm.name)
    if found.path is None:
        return GateDecision(None, found.reason)
    metrics = found.record["spec"].get("metrics", {})
    name = found.path.name
    retention = metrics.get("qa", {}).get("retention")
    if retention is None:
        return GateDecision(None, f"translator {name} has no recorded QA retention")
    if retention >= min_retention:
        return GateDecision("translated", f"translator {name} keeps {retention:.2f} of direct QA quality")
    why = f"translator {name} keeps {retention:.2f} of direct QA quality, below the {min_retention:.2f} threshold"
    blend = metrics.get("qa_blend", {})
    if blend.get("retention") is None:
        return GateDecision(None, why)
    setting = f"translated-blend {blend['blend']} ({blend['blend_select']})"
    if blend["retention"] < min_retention:
        return GateDecision(None, f"{why}; {setting} keeps {blend['retention']:.2f}")
    return GateDecision("translated-blend", f"{why}; {setting} keeps {blend['retention']:.2f}",
                        blend["blend"], blend["blend_select"])


def translated_space(translator, lm, prefix_ids) -> CacheSpace:
    digest = hashlib.sha256(f"{translator.fingerprint()}|{lm.fingerprint}".encode()).hexdigest()
    return CacheSpace(f"{lm.name} <- {translator.spec.source.name} ({translator.kind})", digest,
                      ids_sha256(prefix_ids), "translated")


def injection_window(translator, lm, window=None) -> tuple:
    """[start, end) target layers for window injection: given, else the translator's training
    window, else the middle third."""
    from mot.train import default_window
    layers = lm.geometry.num_layers
    start, end = window or translator.spec.training.get("window") or default_window(layers)
    if not 0 <= start < end <= layers:
        raise CagError(f"Injection window {start}:{end} is not inside the generator's {layers} layers.")
    return start, end


@torch.no_grad()
def window_context(store: Store, lm, layout, rows: list, load, timings: dict, window=None,
                   keep: bool = True):
    """Window injection: the MoT translator's K/V in a window of layers, the generator running over
    the context for the others (the paper's replay; costs a prefill of the context)."""
    from cag.kv.assemble import AssembledContext, check_positions, native_prefix_kv
    from mot.injection import window_cache
    chunks = translated_chunks(store, lm, layout, rows, "translated", load, timings, keep)
    prefix = torch.as_tensor(list(layout.prefix_ids), dtype=torch.int64)
    ids = torch.cat([c.token_ids for c in chunks])
    check_positions(lm.geometry, prefix.numel() + ids.numel())
    start = time.perf_counter()
    layers = range(lm.geometry.num_layers)
    keys = [torch.cat([c.keys[l] for c in chunks], dim=1).to(lm.device, torch.float32) for l in layers]
    values = [torch.cat([c.values[l] for c in chunks], dim=1).to(lm.device, torch.float32) for l in layers]
    translator = translator_for(store, lm, "translated")
    prefix_kv = native_prefix_kv(lm, prefix) if prefix.numel() else None
    cache = window_cache(lm, prefix_kv, keys, values, prefix.numel(), injection_window(translator, lm, window))
    positions = torch.arange(prefix.numel(), prefix.numel() + ids.numel(), device=lm.device)
    lm.model(input_ids=ids[None].to(lm.device), position_ids=positions[None], cache=cache, use_cache=True,
             logits_to_keep=1)
    timings["replay"] = (time.perf_counter() - start) * 1e3
    spans, pos = [], prefix.numel()
    for c in chunks:
        spans.append((pos, pos + c.num_tokens))
        pos += c.num_tokens
    return AssembledContext(cache, torch.cat([prefix, ids]), prefix.numel(), spans)


def translated_chunks(store: Store, lm, layout, rows: list, mode: str, load, timings: dict,
                      keep: bool = True) -> list:
    """Target-space chunk caches for `rows` (assembly order). `load(path, doc)` reads a cache file.
    Rotary generators: translated caches are stored in the store and reused (`keep=False`: used
    when stored, never written); absolute-position generators translate at each chunk's landing
    offset every time."""
    translator = translator_for(store, lm, mode)
    source_space = encoder_space(store)
    prefix = list(layout.prefix_ids)
    persist = lm.geometry.is_rotary
    space = translated_space(translator, lm, prefix) if persist else None
    chunks, pos = [], len(prefix)
    for row in rows:
        path = store.cache_path(space, row.text_sha256) if persist else None
        chunk = _stored_translation(path, row.doc, load, timings) if persist and path.is_file() else None
        if chunk is None:
            t0 = time.perf_counter()
            source = load(store.cache_path(source_space, row.text_sha256), row.doc)
            t1 = time.perf_counter()
            chunk = translate_chunk(translator, source, lm, prefix, position_start=pos)
            timings["load"] += (t1 - t0) * 1e3
            timings["translate"] = timings.get("translate", 0.0) + (time.perf_counter() - t1) * 1e3
            if persist and keep:
                store.register_space(space)  # per save: a prune may remove the space meanwhile
                save_chunk_cache(chunk, Path(path), store.config.cache_dtype)
        chunks.append(chunk)
        pos += chunk.num_tokens
    return chunks


def _stored_translation(path: Path, doc: str, load, timings: dict):
    """A stored translated chunk, or None when it is gone or damaged: translations are derived
    data, so a pruned (`cag store prune` racing this ask) or corrupt file is simply made again."""
    t0 = time.perf_counter()
    try:
        chunk = load(path, doc)
    except CagError as exc:
        if path.is_file():  # still there: not a vanished or removed-as-corrupt translation
            raise
        log.warning("translated cache %s unusable (%s); translating again", path.name, exc)
        return None
    timings["load"] += (time.perf_counter() - t0) * 1e3
    return chunk
