"""The server's work, without HTTP: answer a question, ingest, run a conversation turn. Every
model's work runs on that model's queue (cag.server.pool); these methods block until it is done,
so the HTTP layer calls them from threads."""

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cag.ask import AskOptions, AskResult, ask, check_question
from cag.ingest.pipeline import IngestOptions, IngestReport, ingest
from cag.prompt import prompt_layout
from cag.retrieval import load_embedder
from cag.server.config import ServeConfig
from cag.server.errors import HttpError
from cag.server.gate import StoreGate
from cag.server.metrics import ServerMetrics
from cag.store.memory_tier import MemoryTier
from cag.server.paths import resolve_ingest_path, save_upload
from cag.server.pool import LockedEmbedder, ModelPool
from cag.server.sessions import Sessions, check_record
from cag.server.turns import TurnAnswer, TurnRequest, answer_turn
from cag.store.store import Store, default_store_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AskRequest:
    """One question and how to answer it (checked when made: an unknown mode or a bad share is refused)."""

    question: str
    options: AskOptions


@dataclass
class Answered:
    result: AskResult  # timings_ms has `queue` added: the wait in the model's queue
    prompt_tokens: int  # prefix + context + question, as the generator's tokens
    completion_tokens: int
    queue_ms: float


class CagServer:
    """Models, embedder and translators loaded once; the main store and its sessions."""

    def __init__(self, config: ServeConfig):
        self.config = config.check()
        self.store_dir = Path(config.store) if config.store else default_store_dir()
        store = Store.open(self.store_dir)  # a missing store is refused here, naming the fix
        self.store_config = store.config
        store.close()
        self.embedder = LockedEmbedder(load_embedder(self.store_config.embedder))
        allowed = list(config.models) + [self.store_config.encoder]  # the encoder: ingest and sessions
        self.memory = MemoryTier(config.memory_tier_mb * 2**20) if config.memory_tier_mb else None
        self.pool = ModelPool(allowed, config.max_loaded, self.store_dir, self.embedder, config.device, config.dtype,
                              self.memory)
        self.gate = StoreGate()
        self.sessions = Sessions(self.store_dir, self.store_config)
        self.metrics = ServerMetrics(self.memory)
        self.started = time.time()

    def warm_up(self) -> float:
        """Load and warm the served models (up to --max-loaded), the embedder, the index and the
        translators, so that the first request pays none of it; seconds spent."""
        start = time.perf_counter()
        self.pool.warm(list(self.config.models)[:self.config.max_loaded])
        return time.perf_counter() - start

    def close(self) -> None:
        self.pool.close()

    # ---- questions -------------------------------------------------------------------------
    def ask_options(self, model: str, mode: str, top_k: int, max_new_tokens: int, blend: float) -> AskOptions:
        """A request's ask settings, with this server's quality gate for --mode auto."""
        return AskOptions(model=model, mode=mode, top_k=top_k, max_new_tokens=max_new_tokens, blend=blend,
                          min_retention=self.config.min_retention)

    def check_ask(self, request: AskRequest) -> None:
        """Refuse a bad request before it waits in a queue."""
        check_question(request.question)
        options = request.options
        self.pool.check_model(options.model)
        if options.top_k > self.config.max_top_k:
            raise HttpError(f"top_k {options.top_k} is over this server's limit of {self.config.max_top_k}.")
        self.check_new_tokens(options.max_new_tokens)

    def check_new_tokens(self, n: int) -> None:
        if not 1 <= n <= self.config.max_new_tokens:
            raise HttpError(f"max_new_tokens must be 1-{self.config.max_new_tokens} (got {n}).")

    def ask(self, request: AskRequest, on_token=None) -> Answered:
        self.check_ask(request)

        def job(context):
            with self.gate.reading():
                result = ask(request.question, options=request.options, on_token=on_token, lm=context.lm,
                             retriever=context.retriever)
            tokenizer = context.lm.tokenizer
            layout = prompt_layout(tokenizer)
            prompt = len(layout.prefix_ids) + result.context_tokens + len(layout.question_ids(tokenizer, request.question))
            return result, prompt, len(result.answer_ids)

        ran = self.pool.run(request.options.model, job)
        result, prompt, completion = ran.value
        result.timings_ms["queue"] = round(ran.queue_ms, 1)
        self.metrics.answer(result.mode, result.model, result.timings_ms["ttft"], ran.queue_ms)
        return Answered(result, prompt, completion, ran.queue_ms)

    # ---- ingest ------------------------------------------------------------------------------
    def ingest(self, paths: list[str], documents: list[tuple[str, str]]) -> IngestReport:
        """Ingest `paths` (under the ingest roots) and uploaded (name, text) documents into the main
        store with its encoder, while no question reads it."""
        roots = [Path(r) for r in self.config.ingest_roots]
        files = [resolve_ingest_path(p, roots) for p in paths]
        if not files and not documents:
            raise HttpError("Nothing to ingest: give paths (under --ingest-root) or documents [{\"name\", \"text\"}].")
        config = self.store_config
        options = IngestOptions(encoder=config.encoder, embedder=config.embedder, chunk_tokens=config.chunk_tokens,
                                chunk_overlap=config.chunk_overlap, faiss_factory=config.faiss_factory,
                                cache_dtype=config.cache_dtype)

        def job(context):
            with self.gate.writing():
                uploads = [save_upload(self.store_dir, name, text) for name, text in documents]
                return ingest(files + uploads, self.store_dir, options, encoder_lm=context.lm, embedder=self.embedder)

        return self.pool.run(config.encoder, job).value

    # ---- sessions ----------------------------------------------------------------------------
    def create_session(self, memory_model: str | None) -> dict:
        memory = memory_model or self.store_config.encoder
        self.pool.check_model(memory)
        return self.sessions.create(memory)

    def session(self, sid: str) -> dict:
        return {**self.sessions.meta(sid), "records": [r.to_json() for r in self.sessions.records(sid)]}

    def add_record(self, sid: str, role: str, author: str, content: str) -> dict:
        """Append a record written elsewhere (an agent's notes) to the session and ingest it."""
        check_record(role, author, content)
        with self.sessions.lock(sid):
            memory = self.sessions.meta(sid)["memory_model"]
            self._catch_up(sid, memory)
            added = self.sessions.append(sid, [(role, author, content)])
            report = self._sync(sid, memory)
        return {"session": sid, "records": [r.to_json() for r in added], "ingest_ms": round(report.seconds * 1e3, 1)}

    def turn(self, sid: str, request: TurnRequest, on_token=None) -> dict:
        """The turn's model answers from the history; the message and the reply join the history."""
        self.pool.check_model(request.model)
        self.check_new_tokens(request.max_new_tokens)
        with self.sessions.lock(sid):
            memory = self.sessions.meta(sid)["memory_model"]
            self._catch_up(sid, memory)
            records = self.sessions.records(sid)

            def job(context):
                store = self.sessions.open_store(sid)
                try:
                    return answer_turn(context.lm, store, records, request, memory, on_token)
                finally:
                    if store is not None:
                        store.close()

            ran = self.pool.run(request.model, job)
            answer: TurnAnswer = ran.value
            answer.timings_ms["queue"] = round(ran.queue_ms, 1)
            added = []
            if request.remember:
                added = self.sessions.append(sid, [("user", "user", request.message),
                                                   ("assistant", request.model, answer.reply or "(no answer)")])
                answer.timings_ms["ingest"] = round(self._sync(sid, memory).seconds * 1e3, 1)
        self.metrics.answer(f"history-{answer.history.mode}", request.model, answer.timings_ms["ttft"], ran.queue_ms)
        return {"session": sid, "turn": (records[-1].turn if records else 0) + 1, "model": request.model,
                "reply": answer.reply, "history": asdict(answer.history), "timings_ms": answer.timings_ms,
                "notes": answer.notes, "records": [r.to_json() for r in added]}

    def _catch_up(self, sid: str, memory: str) -> None:
        """A turn killed after its records were written and before they were ingested: ingest now."""
        if self.sessions.lagging(sid):
            log.warning("session %s: ingesting records a previous turn left un-ingested", sid)
            self._sync(sid, memory)

    def _sync(self, sid: str, memory: str) -> IngestReport:
        return self.pool.run(memory, lambda context: self.sessions.sync(sid, context.lm, self.embedder)).value
