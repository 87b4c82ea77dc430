"""One conversation turn: the turn's model answers the message from the session's history, read
through cag's context modes (the mode registry; cag never imports the translators' package):

    native      the turn's model is the memory model: its own stored caches of the history
    translated  another model: the memory model's caches translated by the MoT translator from the
                memory model to the turn's model (stored in the session for the next turns)
    direct      the history read as text (the comparison), or when no translator exists

`history_mode` "auto" picks the first that applies, in that order; any registered mode may be named.
"""

import time
from collections import Counter
from dataclasses import dataclass, field

from cag.defaults import DEFAULT_BLEND, DEFAULT_MAX_NEW_TOKENS
from cag.errors import CagError
from cag.kv.generate import greedy_generate
from cag.modes import ContextRequest, ModeOptions, Reads, get_mode
from cag.modes.registry import AUTO
from cag.prompt import prompt_layout
from cag.server.errors import HttpError
from cag.server.sessions import Record, history_rows


@dataclass(frozen=True)
class TurnRequest:
    message: str
    model: str
    history_mode: str = AUTO
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    remember: bool = True  # False: the message and the reply are not added to the history
    blend: float = DEFAULT_BLEND  # blend history modes: share of the history's tokens recomputed


@dataclass
class HistoryRead:
    mode: str  # the context mode the history was read in
    memory_model: str  # whose caches the session stores
    records: int
    chunks: int
    tokens: int  # context tokens the turn's model read the history as
    translated: bool  # the memory model's caches were translated into the turn's model's space
    parts: list = field(default_factory=list)  # per record: n, role, author, chunks, read_as


@dataclass
class TurnAnswer:
    reply: str
    history: HistoryRead
    timings_ms: dict
    notes: list


def choose_mode(store, lm, wanted: str, rows: list) -> tuple[object, str]:
    """(the context mode to read the history in, a note saying why)."""
    if not rows:
        return get_mode("none"), "the history is empty: the message is read alone"
    memory = store.config.encoder
    same = lm.fingerprint == store.config.encoder_fingerprint
    if wanted == AUTO:
        if same:
            return get_mode("native"), f"history read natively: {lm.name} is the session's memory model"
        translated = get_mode("translated")
        try:
            translated.prepare(store, lm)
        except CagError as exc:
            return get_mode("direct"), f"history read as text: {exc}"
        return translated, f"history translated from {memory}'s caches into {lm.name}'s by the MoT translator"
    mode = get_mode(wanted)
    if mode.reads is Reads.NATIVE and not same:
        raise HttpError(f"history_mode {wanted} needs the turn's model to be the session's memory model "
                        f"{memory}; use translated (or auto) to read its caches from {lm.name}, or direct.")
    mode.prepare(store, lm)
    why = mode.missing(store, lm, rows)
    if why:
        raise CagError(why)
    return mode, f"history_mode {wanted}"


def answer_turn(lm, store, records: list[Record], request: TurnRequest, memory_model: str,
                on_token=None) -> TurnAnswer:
    """Answer `request.message` with `lm` from the session store's history (`store` may be None:
    no history yet)."""
    if not request.message.strip():
        raise HttpError("The message is empty.")
    rows = history_rows(store)
    mode, note = choose_mode(store, lm, request.history_mode, rows)
    layout = prompt_layout(lm.tokenizer)
    start = time.perf_counter()
    q_ids = layout.question_ids(lm.tokenizer, request.message)
    context_request = ContextRequest(store, lm, layout, rows, q_ids, ModeOptions(blend=request.blend))
    built = mode.build(context_request)
    generation_start = time.perf_counter()
    generation = greedy_generate(lm, built.lead_ids + q_ids, built.context, request.max_new_tokens, on_token)
    timings = {**built.timings, "prefill": generation.prefill_seconds * 1e3,
               "ttft": (generation_start - start + generation.ttft_seconds) * 1e3,
               "total": (time.perf_counter() - start) * 1e3}
    history = describe(memory_model, mode, rows, records, built.context_tokens)
    return TurnAnswer(generation.text, history, {k: round(v, 1) for k, v in timings.items()}, [note])


def describe(memory_model: str, mode, rows: list, records: list[Record], tokens: int) -> HistoryRead:
    """Which model wrote which part of the history, and how the turn's model read it."""
    per_record = Counter(int(r.doc_locator[1:]) for r in rows)
    read_as = mode.name if rows else "none"
    parts = [{"n": r.n, "turn": r.turn, "role": r.role, "author": r.author, "chunks": per_record.get(r.n, 0),
              "read_as": read_as if per_record.get(r.n) else "not ingested"} for r in records]
    return HistoryRead(read_as, memory_model, len(records), len(rows), tokens if rows else 0,
                       mode.reads is Reads.ENCODER, parts)
