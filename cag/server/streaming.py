"""Tokens generated on a model's worker thread, sent as server-sent events.

The blocking call runs in a thread with `on_token` as its callback; tokens cross to the event loop
through an asyncio queue. The response starts only once the first event is there, so a request
refused before its first token (unknown mode, context too long) still gets its 4xx JSON answer.
When the client goes away, the next token raises `StreamClosed` in the worker, which frees the
model for the next request in its queue.
"""

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse


class StreamClosed(Exception):
    """The client stopped reading: the generation is abandoned."""


def sse(data, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


class TokenBridge:
    def __init__(self):
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.closed = threading.Event()
        self.task: asyncio.Task | None = None

    def on_token(self, piece: str) -> None:  # called on the model's worker thread
        if self.closed.is_set():
            raise StreamClosed()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, ("token", piece))

    async def _run(self, call: Callable) -> None:
        try:
            self.queue.put_nowait(("done", await run_in_threadpool(call, self.on_token)))
        except Exception as exc:  # noqa: BLE001 - handed to the response (or dropped if it is gone)
            self.queue.put_nowait(("error", exc))

    async def first(self, call: Callable):
        """Start `call(on_token)`; the first event (a refusal raises here, before any byte is sent)."""
        self.task = asyncio.create_task(self._run(call))
        kind, value = await self.queue.get()
        if kind == "error":
            raise value
        return kind, value

    async def events(self, first) -> AsyncIterator[tuple[str, object]]:
        item = first
        try:
            while True:
                yield item
                if item[0] != "token":
                    return
                item = await self.queue.get()
        finally:
            self.closed.set()


async def stream_response(call: Callable, render: Callable[[str, object], list[str]]) -> StreamingResponse:
    """Run `call(on_token)`; each event (kind "token", "done" or "error") rendered as SSE lines."""
    bridge = TokenBridge()
    first = await bridge.first(call)

    async def body():
        async for kind, value in bridge.events(first):
            for line in render(kind, value):
                yield line

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
