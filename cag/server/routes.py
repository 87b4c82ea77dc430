"""The endpoints: questions (cag's own and OpenAI's chat completions), ingest, models, health,
metrics. Blocking work runs in threads (`run_in_threadpool`) that wait on the models' queues."""

import time
from dataclasses import asdict

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from cag.server.errors import error_body
from cag.server.openai_compat import (chunk, completion, extension, finish_reason, new_id, question_of, unsent_tail,
                                      usage)
from cag.server.schemas import AskBody, ChatBody, IngestBody
from cag.server.service import AskRequest, CagServer
from cag.server.streaming import sse, stream_response

DEFAULT_NEW_TOKENS = 64  # as `cag ask`


def token_events(result_of, text_field: str = "answer"):
    """An SSE renderer for cag's own streams: `token` events ({"text"}), then one `result` event (the
    JSON the endpoint answers without streaming; its `text_field` is the whole generated text), or
    one `error` event."""
    sent = []

    def render(kind, value):
        if kind == "token":
            sent.append(value)
            return [sse({"text": value}, "token")]
        if kind == "error":
            return [sse(error_body(value)[1], "error")]
        result = result_of(value)
        tail = unsent_tail(result[text_field], "".join(sent))
        return ([sse({"text": tail}, "token")] if tail else []) + [sse(result, "result")]

    return render


def router(server: CagServer) -> APIRouter:
    r = APIRouter()

    @r.post("/v1/ask")
    async def ask(body: AskBody):
        request = AskRequest(body.question, server.ask_options(body.model or server.config.default_model, body.mode,
                                                               body.top_k, body.max_new_tokens, body.blend))
        if not body.stream:
            return (await run_in_threadpool(server.ask, request)).result.to_dict()
        server.check_ask(request)
        return await stream_response(lambda on_token: server.ask(request, on_token),
                                     token_events(lambda answered: answered.result.to_dict()))

    @r.post("/v1/chat/completions")
    async def chat_completions(body: ChatBody):
        question, notes = question_of(body.messages)
        max_new = body.max_completion_tokens or body.max_tokens or DEFAULT_NEW_TOKENS
        request = AskRequest(question, server.ask_options(body.model, body.cag.mode, body.cag.top_k, max_new,
                                                          body.cag.blend))
        if not body.stream:
            return completion(await run_in_threadpool(server.ask, request), body.model, max_new, notes)
        server.check_ask(request)
        cid, created = new_id()
        sent = []

        def render(kind, value):
            if kind == "token":
                delta = {"content": value} if sent else {"role": "assistant", "content": value}
                sent.append(value)
                return [sse(chunk(cid, created, body.model, delta))]
            if kind == "error":
                return [sse(error_body(value)[1]), sse("[DONE]")]
            delta = {"content": unsent_tail(value.result.answer, "".join(sent))}
            if not sent:
                delta["role"] = "assistant"
            last = chunk(cid, created, body.model, delta, finish_reason(value, max_new), usage=usage(value),
                         cag=extension(value, notes))
            return [sse(last), sse("[DONE]")]

        return await stream_response(lambda on_token: server.ask(request, on_token), render)

    @r.post("/v1/ingest")
    async def ingest(body: IngestBody):
        documents = [(d.name, d.text) for d in body.documents]
        report = await run_in_threadpool(server.ingest, body.paths, documents)
        return asdict(report)

    @r.get("/v1/models")
    async def models():
        loaded = set(server.pool.loaded())
        encoder = server.store_config.encoder
        return {"object": "list", "data": [
            {"id": name, "object": "model", "created": int(server.started), "owned_by": "cag",
             "loaded": name in loaded, "role": "encoder" if name == encoder else "generator"}
            for name in server.pool.allowed]}

    @r.get("/v1/health")
    async def health():
        return {"status": "ok", "store": str(server.store_dir), "loaded": server.pool.loaded(),
                "uptime_s": round(time.time() - server.started, 1)}

    @r.get("/metrics")
    async def metrics():
        return Response(server.metrics.render(), media_type=server.metrics.content_type)

    return r
