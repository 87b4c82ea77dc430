"""`cag ask`: answer a question from a store, in one of several context modes.

    direct      the retrieved text in the prompt, prefilled by the generator (the quality reference)
    native      the generator's own stored chunk caches (`cag ingest --also-for MODEL`)
    translated  the encoder's caches translated by a MoT translator (`cag train`)
    single      the same with the single-path translator baseline (one expert per layer)
    ridge       the same with the closed-form ridge translator baseline
    translated-window
                the MoT translator's K/V in a window of the generator's layers, the generator
                running over the context for the others (the paper's replay; a prefill's cost)
    translated-blend, native-blend
                the translated (or native) context with a share of its tokens (--blend, default
                0.15) recomputed by the generator over all layers, attending to the stored K/V of
                the others: CacheBlend-style repair of translation errors and of the attention
                missing between independently prefilled chunks (cag.kv.blend)
    none        the question alone
    auto        native if stored, else translated if a MoT translator exists and its recorded QA
                retention clears --min-retention (the quality gate), else direct

Chunk order: retrieved chunks are laid out least relevant first, so the best chunk sits right
before the question. Every mode starts from the generator's own native prefix (BOS / chat-template
start), prefilled once per loaded model and reused; the generator then prefills the question, and
in direct mode the chunks' text before it.
"""

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cag.defaults import DEFAULT_BLEND, DEFAULT_BLEND_SELECT, DEFAULT_GENERATOR, DEFAULT_MIN_RETENTION
from cag.errors import CagError, CorruptCacheError
from cag.kv.assemble import assemble, check_positions
from cag.kv.chunk_cache import ids_sha256
from cag.kv.generate import greedy_generate
from cag.kv.serde import load_chunk_cache
from cag.models import load_model
from cag.prompt import prompt_layout
from cag.retrieval import Retriever
from cag.store.store import Store

log = logging.getLogger(__name__)
MODES = ("auto", "direct", "native", "translated", "single", "ridge", "translated-window",
         "translated-blend", "native-blend", "none")
# the modes that need a translator, and the translator kind each reads (mot/registry)
TRANSLATOR_KIND = {"translated": "mot", "single": "single", "ridge": "ridge",
                   "translated-window": "mot", "translated-blend": "mot"}
TRANSLATED = tuple(TRANSLATOR_KIND)


@dataclass
class Source:
    doc: str
    chunk: int
    score: float


@dataclass
class AskResult:
    answer: str
    mode: str
    model: str
    sources: list
    context_tokens: int
    timings_ms: dict
    notes: list = field(default_factory=list)
    retrieved: list = field(default_factory=list, repr=False)  # [Retrieved], best first; not in JSON

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("retrieved")
        return data


def check_question(question: str, mode: str, top_k: int) -> None:
    if not question or not question.strip():
        raise CagError("The question is empty.")
    if mode not in MODES:
        raise CagError(f"Unknown mode {mode!r}; choose one of {', '.join(MODES)}.")
    if top_k < 1:
        raise CagError(f"--top-k must be at least 1 (got {top_k}).")


def ask(question: str, store_dir: Path | None = None, model: str = DEFAULT_GENERATOR,
        top_k: int = 3, mode: str = "auto", max_new_tokens: int = 64, on_token=None,
        lm=None, retriever: Retriever | None = None, min_retention: float | None = None,
        device: str = "auto", dtype: str = "auto", blend: float = DEFAULT_BLEND,
        blend_select: str = DEFAULT_BLEND_SELECT) -> AskResult:
    """Answer `question`; `lm` / `retriever` let callers reuse loaded models across questions.
    `device` / `dtype` place a generator loaded here (see cag.models.loading.resolve_device)."""
    check_question(question, mode, top_k)
    store = retriever.store if retriever else Store.open(store_dir)
    lm = lm or load_model(model, dtype, device)
    retriever = retriever or Retriever(store)
    layout = prompt_layout(lm.tokenizer)
    start = time.perf_counter()
    retrieval = retriever.retrieve(question, top_k) if mode != "none" else None
    chosen, notes, recorded_blend = _choose_mode(mode, store, lm, layout, retrieval, min_retention)
    if recorded_blend is not None:  # auto chose the translated-blend setting the gate recorded
        blend, blend_select = recorded_blend
    if retrieval and retrieval.clamped_from:
        notes.append(f"--top-k {retrieval.clamped_from} is more than the store's "
                     f"{len(retrieval.results)} chunks; used {len(retrieval.results)}")
    ordered = [r.chunk for r in reversed(retrieval.results)] if retrieval else []  # best chunk last
    timings = {"embed": retrieval.embed_ms if retrieval else 0.0,
               "retrieve": retrieval.retrieve_ms if retrieval else 0.0,
               "load": 0.0, "translate": 0.0, "assemble": 0.0}
    q_ids = layout.question_ids(lm.tokenizer, question)
    context, lead_ids, context_tokens = build_context(chosen, store, lm, layout, ordered, timings, blend=blend,
                                                      blend_select=blend_select, question_ids=q_ids)
    generation_start = time.perf_counter()
    generation = greedy_generate(lm, lead_ids + q_ids, context, max_new_tokens, on_token)
    timings["prefill"] = generation.prefill_seconds * 1e3
    timings["ttft"] = (generation_start - start + generation.ttft_seconds) * 1e3
    timings["total"] = (time.perf_counter() - start) * 1e3
    sources = [Source(r.chunk.doc, r.chunk.idx, round(r.score, 4)) for r in retrieval.results] if retrieval else []
    return AskResult(generation.text, chosen, lm.name, sources, context_tokens,
                     {k: round(v, 1) for k, v in timings.items()}, notes,
                     retrieval.results if retrieval else [])


def _native_space(store: Store, lm, layout):
    return store.native_space(lm.fingerprint, ids_sha256(layout.prefix_ids))


def _choose_mode(mode: str, store: Store, lm, layout, retrieval,
                 min_retention=None) -> tuple[str, list, tuple | None]:
    """(mode, notes, (blend share, selection) when auto chose a recorded translated-blend setting)."""
    if mode in ("direct", "none") or mode in TRANSLATED:
        return mode, [], None
    space = _native_space(store, lm, layout)
    has_native = space is not None and all(
        store.cache_path(space, r.chunk.text_sha256).is_file() for r in retrieval.results)
    if mode in ("native", "native-blend"):
        if not has_native:
            raise CagError(f"No native caches for {lm.name} in store {store.folder}: run "
                           f"`cag ingest PATH --also-for {lm.name} --store {store.folder}` first, "
                           "or use --mode direct.")
        return mode, [], None
    if has_native:
        return "native", [f"mode auto: using native ({lm.name}'s own stored caches)"], None
    from mot.use import gate
    threshold = DEFAULT_MIN_RETENTION if min_retention is None else min_retention
    decision = gate(store, lm, threshold)
    if decision.mode == "translated":
        return "translated", [f"mode auto: using translated ({decision.why})"], None
    if decision.mode == "translated-blend":
        return ("translated-blend", [f"mode auto: using translated-blend ({decision.why})"],
                (decision.blend, decision.blend_select))
    return "direct", [f"mode auto: using direct (no native caches for {lm.name} in the store; {decision.why})"], None


def build_context(mode: str, store: Store, lm, layout, ordered: list, timings: dict, window=None,
                  blend: float = DEFAULT_BLEND, blend_select: str = DEFAULT_BLEND_SELECT,
                  keep_translated: bool = True, question_ids=None):
    """The context for `ordered` chunk rows (assembly order) in `mode`: (AssembledContext or None,
    ids the generator prefills before the question, context tokens). Fills timings' load/assemble.
    `window`: [start, end) layers for translated-window (default: the translator's); `blend`: the
    share of context tokens the *-blend modes recompute, chosen by `blend_select` (cag.kv.blend;
    "query" reads `question_ids`, the question as the generator will read it after the context);
    `keep_translated`: store chunk translations for reuse (False: translate, use, forget)."""
    if mode.endswith("-blend"):
        from cag.kv.blend import blend as recompute
        context, lead, tokens = build_context(mode.removesuffix("-blend"), store, lm, layout, ordered, timings,
                                              keep_translated=keep_translated)
        t0 = time.perf_counter()
        if context is not None:
            recompute(lm, context, blend, blend_select, question_ids=question_ids)
        timings["blend"] = (time.perf_counter() - t0) * 1e3
        return context, lead, tokens
    tokenizer = lm.tokenizer
    prefix = list(layout.prefix_ids)
    if mode in ("direct", "none"):
        chunk_ids = [] if mode == "none" else [
            tokenizer(row.text, add_special_tokens=False)["input_ids"] for row in ordered]
        flat = [t for ids in chunk_ids for t in ids]
        check_positions(lm.geometry, len(prefix) + len(flat))
        t0 = time.perf_counter()
        context = assemble(lm, [], prefix) if prefix else None  # the same cached prefix as native
        timings["assemble"] = (time.perf_counter() - t0) * 1e3
        return context, flat, len(flat)
    if mode == "translated-window":
        from mot.use import window_context
        context = window_context(store, lm, layout, ordered, _load, timings, window, keep_translated)
        return context, [], context.length - len(prefix)
    if mode in TRANSLATED:
        from mot.use import translated_chunks
        caches = translated_chunks(store, lm, layout, ordered, mode, _load, timings, keep_translated)
        t1 = time.perf_counter()
        context = assemble(lm, caches, prefix)
        timings["assemble"] = (time.perf_counter() - t1) * 1e3
        return context, [], context.length - len(prefix)
    space = _native_space(store, lm, layout)
    t0 = time.perf_counter()
    if space is None:
        raise CagError(f"No native caches for {lm.name} in store {store.folder}: ingest with "
                       f"--also-for {lm.name}.")
    caches = [_load(store.cache_path(space, row.text_sha256), row.doc) for row in ordered]
    t1 = time.perf_counter()
    context = assemble(lm, caches, prefix)
    timings["load"], timings["assemble"] = (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3
    return context, [], context.length - len(prefix)


def _load(path: Path, doc: str):
    try:
        return load_chunk_cache(path)
    except CorruptCacheError as exc:
        path.unlink(missing_ok=True)  # derived data: removed so that re-ingesting re-creates it
        source = doc.split("#")[0]
        raise CagError(f"{exc} It was removed; re-ingest its document to re-create it: "
                       f"`cag ingest {source}`.") from exc
