"""The conversation endpoints: create a session, read it, add a turn (a model answers from the
history) or a record written elsewhere (an agent's notes)."""

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from cag.server.routes import token_events
from cag.server.schemas import RecordBody, SessionBody, TurnBody
from cag.server.service import CagServer
from cag.server.streaming import stream_response
from cag.server.turns import TurnRequest


def session_router(server: CagServer) -> APIRouter:
    r = APIRouter()

    @r.post("/v1/sessions", status_code=201)
    async def create(body: SessionBody | None = None):
        return await run_in_threadpool(server.create_session, body.memory_model if body else None)

    @r.get("/v1/sessions/{sid}")
    async def read(sid: str):
        return await run_in_threadpool(server.session, sid)

    @r.post("/v1/sessions/{sid}/records", status_code=201)
    async def add_record(sid: str, body: RecordBody):
        return await run_in_threadpool(server.add_record, sid, body.role, body.author, body.content)

    @r.post("/v1/sessions/{sid}/turns")
    async def turn(sid: str, body: TurnBody):
        request = TurnRequest(body.message, body.model or server.config.default_model, body.history_mode,
                              body.max_new_tokens, body.remember, body.blend)
        if not body.stream:
            return await run_in_threadpool(server.turn, sid, request)
        return await stream_response(lambda on_token: server.turn(sid, request, on_token),
                                     token_events(lambda result: result, "reply"))

    return r
