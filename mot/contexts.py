"""Translated contexts for the translated modes: the encoder's stored chunk caches, translated into
the generator's space (persisted per generator and translator the first time), then assembled; or,
for window injection, placed in a window of layers while the generator replays the context."""

import hashlib
import logging
from dataclasses import dataclass

import torch

from cag.errors import CagError, DiskFullError
from cag.kv.assemble import AssembledContext, check_positions, native_prefix_kv
from cag.kv.chunk_cache import ids_sha256, tokenize_chunk
from cag.kv.serde import derived_cache_dtype, save_chunk_cache
from cag.store.spaces import CacheSpace, Role
from cag.store.store import Store
from cag.timing import Timings
from cag.translations import TranslationId, TranslatorKind
from cag.records import checkpoint_paths
from mot.checkpoint import load_translator
from mot.injection import injection_window, window_cache
from mot.registry import find_translator
from mot.translator import translate_chunks

log = logging.getLogger(__name__)
_LOADED: dict = {}  # (path, weights mtime, record mtime, device) -> Translator


def encoder_space(store: Store) -> CacheSpace:
    for space in store.spaces():
        if space.role is Role.ENCODER and space.model_fingerprint == store.config.encoder_fingerprint:
            return space
    raise CagError(f"Store {store.folder} holds no encoder caches; re-ingest it.")


def translator_for(store: Store, lm, kind: TranslatorKind, mode: str | None = None):
    """The `kind` translator from the store's encoder to `lm` (for `mode`, named in errors), loaded
    once per file version."""
    wanted = TranslationId(store.config.encoder, lm.name, kind)
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, wanted)
    if found.path is None:
        raise CagError(f"Cannot answer in mode {mode or kind}: {found.reason}.")
    record = checkpoint_paths(found.path)[1]  # a changed JSON (spec, metrics) makes another translator too
    key = (str(found.path), found.path.stat().st_mtime_ns, record.stat().st_mtime_ns, str(lm.device))
    if key not in _LOADED:
        _LOADED[key] = load_translator(found.path).to(lm.device)  # on the generator's device
    return _LOADED[key]


def translated_space(translator, lm, prefix_ids) -> CacheSpace:
    digest = hashlib.sha256(f"{translator.fingerprint()}|{lm.fingerprint}".encode()).hexdigest()
    translation = TranslationId(translator.spec.source.name, lm.name, translator.kind)
    return CacheSpace(str(translation), digest, ids_sha256(prefix_ids), Role.TRANSLATED, generator=lm.name,
                      source=translation.source, kind=translation.kind)


@dataclass
class TranslatedChunks:
    chunks: list  # [ChunkCache] in the generator's space, assembly order
    timings: Timings  # load, translate (ms)
    notes: list  # what the user should know (one line each): translations that could not be kept


def translated_chunks(store: Store, lm, layout, rows: list, kind, keep: bool = True) -> TranslatedChunks:
    """Target-space chunk caches for `rows` (assembly order). Rotary generators: translated caches
    are stored in the store and reused (`keep=False`: used when stored, never written);
    absolute-position generators translate at each chunk's landing offset every time. The chunks
    not stored are translated together, in one batch. A full disk stops the keeping, never the
    answer (a note says so)."""
    timings, notes = Timings(load=0.0, translate=0.0), []
    translator = translator_for(store, lm, kind)
    source_space = encoder_space(store)
    prefix = list(layout.prefix_ids)
    persist = lm.geometry.is_rotary
    space = translated_space(translator, lm, prefix) if persist else None
    chunks, pending, starts, pos = [], [], [], len(prefix)
    for i, row in enumerate(rows):
        path = store.cache_path(space, row.text_sha256) if persist else None
        chunk = _stored_translation(store, space, row, timings) if persist and path.is_file() else None
        if chunk is None:
            pending.append(i)
            starts.append(pos)
            chunk_tokens = tokenize_chunk(lm.tokenizer, row.text)[0].numel()
        else:
            chunk_tokens = chunk.num_tokens
        chunks.append(chunk)
        pos += chunk_tokens
    if pending:
        with timings.measure("load"):
            sources = [store.read_cache(source_space, rows[i]) for i in pending]
        with timings.measure("translate"):
            made = translate_chunks(translator, sources, lm, prefix, starts)
        keeping = persist and keep
        for i, chunk in zip(pending, made):
            chunks[i] = chunk
            keeping = keeping and _keep(store, space, rows[i], chunk, notes)
    return TranslatedChunks(chunks, timings, notes)


def _keep(store: Store, space: CacheSpace, row, chunk, notes: list) -> bool:
    """Store one translation for later asks; False when the disk is full (with a note): translations
    are only a reuse cache, so the answer goes on without keeping them."""
    try:
        store.register_space(space)  # per save: a prune may remove the space meanwhile
        save_chunk_cache(chunk, store.cache_path(space, row.text_sha256), derived_cache_dtype(store.config.cache_dtype))
        return True
    except DiskFullError as exc:
        note = str(exc.where(f"store {store.folder}", "the answer was made without keeping the translations "
                                                      "(the next ask translates again); free space to keep them."))
        log.warning("%s", note)
        notes.append(note)
        return False


def _stored_translation(store: Store, space: CacheSpace, row, timings: Timings):
    """A stored translated chunk, or None when it is gone or damaged: translations are derived
    data, so a pruned (`cag store prune` racing this ask) or corrupt file is simply made again."""
    path = store.cache_path(space, row.text_sha256)
    try:
        with timings.measure("load"):
            return store.read_cache(space, row)
    except CagError as exc:
        if path.is_file():  # still there: not a vanished or removed-as-corrupt translation
            raise
        log.warning("translated cache %s unusable (%s); translating again", path.name, exc)
        return None


@torch.no_grad()
def window_context(store: Store, lm, layout, rows: list, window=None, keep: bool = True):
    """Window injection: the MoT translator's K/V in a window of layers, the generator running over
    the context for the others (the paper's replay; costs a prefill of the context); the context,
    and its translation (whose timings gain `replay`)."""
    translated = translated_chunks(store, lm, layout, rows, TranslatorKind.MOT, keep)
    chunks, timings = translated.chunks, translated.timings
    prefix = torch.as_tensor(list(layout.prefix_ids), dtype=torch.int64)
    ids = torch.cat([c.token_ids for c in chunks])
    check_positions(lm.geometry, prefix.numel() + ids.numel())
    with timings.measure("replay"):
        cache = _replayed(store, lm, chunks, prefix, ids, window)
    spans, pos = [], prefix.numel()
    for c in chunks:
        spans.append((pos, pos + c.num_tokens))
        pos += c.num_tokens
    return AssembledContext(cache, torch.cat([prefix, ids]), prefix.numel(), spans), translated


def _replayed(store: Store, lm, chunks: list, prefix: torch.Tensor, ids: torch.Tensor, window):
    """The generator's cache with the translated K/V in the window's layers and its own replay of
    the context in the others."""
    layers = range(lm.geometry.num_layers)
    keys = [torch.cat([c.keys[l] for c in chunks], dim=1).to(lm.device, torch.float32) for l in layers]
    values = [torch.cat([c.values[l] for c in chunks], dim=1).to(lm.device, torch.float32) for l in layers]
    translator = translator_for(store, lm, TranslatorKind.MOT)
    prefix_kv = native_prefix_kv(lm, prefix) if prefix.numel() else None
    cache = window_cache(lm, prefix_kv, keys, values, prefix.numel(), injection_window(translator, lm, window))
    positions = torch.arange(prefix.numel(), prefix.numel() + ids.numel(), device=lm.device)
    lm.model(input_ids=ids[None].to(lm.device), position_ids=positions[None], cache=cache, use_cache=True,
             logits_to_keep=1)
    return cache
