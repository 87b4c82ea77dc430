"""Translated contexts for ask and eval: the encoder's stored chunk caches, translated into the
generator's space (persisted per generator and translator the first time), then assembled."""

import hashlib
import logging
import time
from pathlib import Path

from cag.errors import CagError
from cag.kv.chunk_cache import ids_sha256
from cag.kv.serde import save_chunk_cache
from cag.store.store import CacheSpace, Store
from mot.checkpoint import load_translator
from mot.registry import MODE_KIND, find_translator
from mot.translator import translate_chunk

log = logging.getLogger(__name__)
DEFAULT_MIN_RETENTION = 0.6  # --mode auto uses a translator only at or above this QA retention
_LOADED: dict = {}  # (path, mtime) -> Translator


def encoder_space(store: Store) -> CacheSpace:
    for space in store.spaces():
        if space.role == "encoder" and space.model_fingerprint == store.config.encoder_fingerprint:
            return space
    raise CagError(f"Store {store.folder} holds no encoder caches; re-ingest it.")


def translator_for(store: Store, lm, mode: str):
    """The translator for `mode` (translated / single / ridge) from the store's encoder to `lm`."""
    kind = MODE_KIND[mode]
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, kind,
                            store.config.encoder, lm.name)
    if found.path is None:
        raise CagError(f"Cannot answer in mode {mode}: {found.reason}.")
    key = (str(found.path), found.path.stat().st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = load_translator(found.path)
    return _LOADED[key]


def gate(store: Store, lm, min_retention: float) -> tuple[bool, str]:
    """May --mode auto use the MoT translator? (yes/no, why)."""
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, "mot",
                            store.config.encoder, lm.name)
    if found.path is None:
        return False, found.reason
    qa = found.record["spec"].get("metrics", {}).get("qa", {})
    retention = qa.get("retention")
    if retention is None:
        return False, f"translator {found.path.name} has no recorded QA retention"
    if retention < min_retention:
        return False, (f"translator {found.path.name} keeps {retention:.2f} of direct QA quality, "
                       f"below the {min_retention:.2f} threshold")
    return True, f"translator {found.path.name} keeps {retention:.2f} of direct QA quality"


def translated_space(translator, lm, prefix_ids) -> CacheSpace:
    digest = hashlib.sha256(f"{translator.fingerprint()}|{lm.fingerprint}".encode()).hexdigest()
    return CacheSpace(f"{lm.name} <- {translator.spec.source.name} ({translator.kind})", digest,
                      ids_sha256(prefix_ids), "translated")


def translated_chunks(store: Store, lm, layout, rows: list, mode: str, load, timings: dict) -> list:
    """Target-space chunk caches for `rows` (assembly order). `load(path, doc)` reads a cache file.
    Rotary generators: translated caches are stored in the store and reused; absolute-position
    generators translate at each chunk's landing offset every time."""
    translator = translator_for(store, lm, mode)
    source_space = encoder_space(store)
    prefix = list(layout.prefix_ids)
    persist = lm.geometry.is_rotary
    space = translated_space(translator, lm, prefix) if persist else None
    if persist:
        store.register_space(space)
    chunks, pos = [], len(prefix)
    for row in rows:
        path = store.cache_path(space, row.text_sha256) if persist else None
        if persist and path.is_file():
            t0 = time.perf_counter()
            chunk = load(path, row.doc)
            timings["load"] += (time.perf_counter() - t0) * 1e3
        else:
            t0 = time.perf_counter()
            source = load(store.cache_path(source_space, row.text_sha256), row.doc)
            t1 = time.perf_counter()
            chunk = translate_chunk(translator, source, lm, prefix, position_start=pos)
            timings["load"] += (t1 - t0) * 1e3
            timings["translate"] = timings.get("translate", 0.0) + (time.perf_counter() - t1) * 1e3
            if persist:
                save_chunk_cache(chunk, Path(path), store.config.cache_dtype)
        chunks.append(chunk)
        pos += chunk.num_tokens
    return chunks
