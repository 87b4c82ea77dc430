"""The endpoints: questions (cag's own and OpenAI's chat completions), ingest, models, health,
metrics. Blocking work runs in threads (`run_in_threadpool`) that wait on the models' queues."""

import time
from dataclasses import asdict

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from cag.server.errors import error_body
from cag.server.openai_compat import chunk, completion, extension, finish_reason, new_id, question_of, usage
from cag.server.schemas import AskBody, ChatBody, IngestBody
from cag.server.service import AskRequest, CagServer
from cag.server.streaming import sse, stream_response

DEFAULT_NEW_TOKENS = 64  # as `cag ask`


def router(server: CagServer) -> APIRouter:
    r = APIRouter()

    @r.post("/v1/ask")
    async def ask(body: AskBody):
        request = AskRequest(body.question, body.model or server.config.default_model, body.mode, body.top_k,
                             body.max_new_tokens)
        if not body.stream:
            return (await run_in_threadpool(server.ask, request)).result.to_dict()
        server.check_ask(request)

        def render(kind, value):
            if kind == "token":
                return [sse({"text": value}, "token")]
            return [sse(value.result.to_dict(), "result") if kind == "done" else sse(error_body(value)[1], "error")]

        return await stream_response(lambda on_token: server.ask(request, on_token), render)

    @r.post("/v1/chat/completions")
    async def chat_completions(body: ChatBody):
        question, notes = question_of(body.messages)
        max_new = body.max_completion_tokens or body.max_tokens or DEFAULT_NEW_TOKENS
        request = AskRequest(question, body.model, body.cag.mode, body.cag.top_k, max_new)
        if not body.stream:
            return completion(await run_in_threadpool(server.ask, request), body.model, max_new, notes)
        server.check_ask(request)
        cid, created = new_id()
        opened = []

        def render(kind, value):
            if kind == "token":
                delta = {"content": value} if opened else {"role": "assistant", "content": value}
                opened.append(True)
                return [sse(chunk(cid, created, body.model, delta))]
            if kind == "error":
                return [sse(error_body(value)[1]), sse("[DONE]")]
            last = chunk(cid, created, body.model, {} if opened else {"role": "assistant", "content": ""},
                         finish_reason(value, max_new), usage=usage(value), cag=extension(value, notes))
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
