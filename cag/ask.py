"""`cag ask`: answer a question from a store, in one of the context modes (cag.modes).

Every one-time cost (opening the store, loading the embedder and the generator, the first forward
pass that pages the generator's weights in and prefills its prompt prefix, loading a translator)
is paid before the question is timed and reported as `warmup`; `ttft` runs from the question to
the first generated token: embedding, retrieval, loading and translating chunk caches, assembly,
the generator's prefill of what it reads itself, and the first token.

Chunk order: retrieved chunks are laid out least relevant first, so the best chunk sits right
before the question.
"""

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cag.defaults import (DEFAULT_BLEND, DEFAULT_BLEND_SELECT, DEFAULT_CONTEXT_SCALE, DEFAULT_GENERATOR,
                          DEFAULT_MIN_RETENTION)
from cag.errors import CagError
from cag.kv.assemble import warm_up
from cag.kv.generate import greedy_generate
from cag.models import load_model
from cag.modes import AutoChooser, ContextRequest, ModeOptions, get_mode
from cag.modes.scaled import check_context_scale
from cag.prompt import prompt_layout
from cag.readers import reading
from cag.retrieval import Retriever
from cag.store.store import Store

log = logging.getLogger(__name__)


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
    answer_ids: list = field(default_factory=list, repr=False)  # the generated token ids; not in JSON

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("retrieved")
        data.pop("answer_ids")
        return data


def check_question(question: str, mode: str, top_k: int) -> None:
    if not question or not question.strip():
        raise CagError("The question is empty.")
    if mode != "auto":
        get_mode(mode)  # an unknown mode is refused here, naming the known ones
    if top_k < 1:
        raise CagError(f"--top-k must be at least 1 (got {top_k}).")


def check_question_fits(lm, prefix_tokens: int, question_tokens: int, max_new_tokens: int) -> None:
    """Refuse a question too long for the generator even without any context."""
    needed = prefix_tokens + question_tokens + max_new_tokens
    if needed > lm.geometry.max_positions:
        raise CagError(f"The question is {question_tokens:,} tokens: with the prompt and a {max_new_tokens}-token "
                       f"answer it needs {needed:,} positions, but {lm.name} handles at most "
                       f"{lm.geometry.max_positions:,}. Shorten the question.")


def ask(question: str, store_dir: Path | None = None, model: str = DEFAULT_GENERATOR,
        top_k: int = 3, mode: str = "auto", max_new_tokens: int = 64, on_token=None,
        lm=None, retriever: Retriever | None = None, min_retention: float | None = None,
        device: str = "auto", dtype: str = "auto", blend: float = DEFAULT_BLEND,
        blend_select: str = DEFAULT_BLEND_SELECT, context_scale: float = DEFAULT_CONTEXT_SCALE) -> AskResult:
    """Answer `question`; `lm` / `retriever` let callers keep models loaded across questions.
    `device` / `dtype` place a generator loaded here (see cag.models.loading.resolve_device).
    `blend_select`: a registered blend selection (cag.kv.blend; experiments register others).
    `context_scale`: the scaled modes' factor on the context's share of attention (cag.modes.scaled)."""
    check_question(question, mode, top_k)
    check_context_scale(context_scale)
    warm_start = time.perf_counter()
    store = retriever.store if retriever else Store.open(store_dir)
    lm = lm or load_model(model, dtype, device)
    retriever = retriever or Retriever(store)
    layout = prompt_layout(lm.tokenizer)
    chooser = AutoChooser(DEFAULT_MIN_RETENTION if min_retention is None else min_retention) \
        if mode == "auto" else None
    fixed = None if chooser else get_mode(mode)
    (chooser or fixed).prepare(store, lm)
    retrieves = chooser is not None or fixed.needs_retrieval
    if retrieves:
        retriever.warm_up()
    warm_up(lm, layout.prefix_ids)
    warmup_ms = (time.perf_counter() - warm_start) * 1e3

    start = time.perf_counter()
    q_ids = layout.question_ids(lm.tokenizer, question)
    check_question_fits(lm, len(layout.prefix_ids), len(q_ids), max_new_tokens)
    retrieval = retriever.retrieve(question, top_k) if retrieves else None
    rows = [r.chunk for r in reversed(retrieval.results)] if retrieval else []  # best chunk last
    options, notes = ModeOptions(blend=blend, blend_select=blend_select, context_scale=context_scale), []
    if chooser:
        chosen, options, note = chooser.choose(store, lm, rows, options)
        notes.append(note)
    else:
        chosen = fixed
        why = chosen.missing(store, lm, rows)
        if why:
            raise CagError(why)
    if retrieval and retrieval.clamped_from:
        notes.append(f"--top-k {retrieval.clamped_from} is more than the store's "
                     f"{len(retrieval.results)} chunks; used {len(retrieval.results)}")
    request = ContextRequest(store, lm, layout, rows, q_ids, options)
    built = chosen.build(request)
    notes.extend(request.notes)
    generation_start = time.perf_counter()
    with reading(lm, built.reader):  # a reader adapter (reader modes) on the question and answer only
        generation = greedy_generate(lm, built.lead_ids + q_ids, built.context, max_new_tokens, on_token)
    timings = {"warmup": warmup_ms, "embed": retrieval.embed_ms if retrieval else 0.0,
               "retrieve": retrieval.retrieve_ms if retrieval else 0.0, **request.timings,
               "prefill": generation.prefill_seconds * 1e3,
               "ttft": (generation_start - start + generation.ttft_seconds) * 1e3,
               "total": (time.perf_counter() - start) * 1e3}
    sources = [Source(r.chunk.doc, r.chunk.idx, round(r.score, 4)) for r in retrieval.results] if retrieval else []
    return AskResult(generation.text, chosen.name, lm.name, sources, built.context_tokens,
                     {k: round(v, 1) for k, v in timings.items()}, notes,
                     retrieval.results if retrieval else [], generation.token_ids)
