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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from cag.defaults import (DEFAULT_BLEND, DEFAULT_BLEND_SELECT, DEFAULT_GENERATOR, DEFAULT_MAX_NEW_TOKENS,
                          DEFAULT_MIN_RETENTION, DEFAULT_TOP_K)
from cag.errors import CagError
from cag.kv.assemble import warm_up
from cag.kv.generate import greedy_generate
from cag.models import load_model
from cag.kv.blend import check_blend_options
from cag.models.loading import check_dtype, device_setting, dtype_setting
from cag.modes import AutoChooser, ContextRequest, ModeOptions, get_mode
from cag.modes.registry import AUTO
from cag.modes.table import mode_help
from cag.settings import check_at_least, setting
from cag.prompt import prompt_layout
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


def _known_mode(mode: str) -> str:
    if mode != AUTO:
        get_mode(mode)  # an unknown mode is refused here, naming the known ones
    return mode


@dataclass(frozen=True)
class AskOptions:
    """How a question is answered: the settings of `cag ask`, of the server's asks and of the
    llama-index adapters, declared once (their CLI options come from these fields)."""

    model: str = setting(DEFAULT_GENERATOR, "Generator: alias (see `cag models`), hub id, model folder or .gguf file.",
                         short="-m", envvar="CAG_MODEL")
    mode: str = setting(AUTO, mode_help)
    top_k: int = setting(DEFAULT_TOP_K, "Chunks to retrieve.", short="-k")
    max_new_tokens: int = setting(DEFAULT_MAX_NEW_TOKENS, "Answer length limit.", minimum=1)
    blend: float = setting(DEFAULT_BLEND, "Share of context tokens the -blend modes recompute (those the question "
                           "attends to most).", minimum=0.0, maximum=1.0)
    blend_select: str = setting(DEFAULT_BLEND_SELECT, "Which tokens the -blend modes recompute (a registered "
                                "blend selection; experiments register others).")
    min_retention: float = setting(DEFAULT_MIN_RETENTION, "Quality gate for --mode auto: use a translator only if "
                                   "its recorded QA retention (score / direct score) is at least this; below it, the "
                                   "translated-blend setting recorded beside it if that clears it, else direct.")
    device: str = device_setting()
    dtype: str = dtype_setting()

    def __post_init__(self):
        _known_mode(self.mode)
        check_at_least("top-k", self.top_k)
        check_at_least("max-new-tokens", self.max_new_tokens)
        check_blend_options(self.blend, self.blend_select)
        check_dtype(self.dtype)


def check_question(question: str) -> None:
    if not question or not question.strip():
        raise CagError("The question is empty.")


def check_question_fits(lm, prefix_tokens: int, question_tokens: int, max_new_tokens: int) -> None:
    """Refuse a question too long for the generator even without any context."""
    needed = prefix_tokens + question_tokens + max_new_tokens
    if needed > lm.geometry.max_positions:
        raise CagError(f"The question is {question_tokens:,} tokens: with the prompt and a {max_new_tokens}-token "
                       f"answer it needs {needed:,} positions, but {lm.name} handles at most "
                       f"{lm.geometry.max_positions:,}. Shorten the question.")


def ask(question: str, store_dir: Path | None = None, options: AskOptions | None = None, *, on_token=None,
        lm=None, retriever: Retriever | None = None, **settings) -> AskResult:
    """Answer `question` with `options` (default AskOptions()), any of its fields overridden by
    `settings` (ask(q, model=..., top_k=1)); `lm` / `retriever` let callers keep models loaded
    across questions."""
    options = replace(options or AskOptions(), **settings)
    check_question(question)
    mode, top_k, max_new_tokens = options.mode, options.top_k, options.max_new_tokens
    warm_start = time.perf_counter()
    store = retriever.store if retriever else Store.open(store_dir)
    lm = lm or load_model(options.model, options.dtype, options.device)
    retriever = retriever or Retriever(store)
    layout = prompt_layout(lm.tokenizer)
    chooser = AutoChooser(options.min_retention) if mode == AUTO else None
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
    mode_options, notes = ModeOptions(blend=options.blend, blend_select=options.blend_select), []
    if chooser:
        chosen, mode_options, note = chooser.choose(store, lm, rows, mode_options)
        notes.append(note)
    else:
        chosen = fixed
        why = chosen.missing(store, lm, rows)
        if why:
            raise CagError(why)
    if retrieval and retrieval.clamped_from:
        notes.append(f"--top-k {retrieval.clamped_from} is more than the store's "
                     f"{len(retrieval.results)} chunks; used {len(retrieval.results)}")
    request = ContextRequest(store, lm, layout, rows, q_ids, mode_options)
    built = chosen.build(request)
    notes.extend(built.notes)
    generation_start = time.perf_counter()
    generation = greedy_generate(lm, built.lead_ids + q_ids, built.context, max_new_tokens, on_token)
    timings = {"warmup": warmup_ms, "embed": retrieval.embed_ms if retrieval else 0.0,
               "retrieve": retrieval.retrieve_ms if retrieval else 0.0,
               "load": 0.0, "translate": 0.0, "assemble": 0.0, **built.timings,
               "prefill": generation.prefill_seconds * 1e3,
               "ttft": (generation_start - start + generation.ttft_seconds) * 1e3,
               "total": (time.perf_counter() - start) * 1e3}
    sources = [Source(r.chunk.doc, r.chunk.idx, round(r.score, 4)) for r in retrieval.results] if retrieval else []
    return AskResult(generation.text, chosen.name, lm.name, sources, built.context_tokens,
                     {k: round(v, 1) for k, v in timings.items()}, notes,
                     retrieval.results if retrieval else [], generation.token_ids)
