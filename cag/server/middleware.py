"""ASGI middleware, outermost first: request metrics (every answer counted, refusals too), the
catch-all for internal errors, the API key, and the request body limit (read before the app sees
it, so an oversized body never reaches a JSON parser)."""

import hmac
import json
import logging
import re

from cag.server.errors import error_body

log = logging.getLogger(__name__)

HEALTH = "/v1/health"
_SESSION_PATHS = ((re.compile(r"/v1/sessions/[^/]+"), "/v1/sessions/{id}"),
                  (re.compile(r"/v1/sessions/[^/]+/turns"), "/v1/sessions/{id}/turns"),
                  (re.compile(r"/v1/sessions/[^/]+/records"), "/v1/sessions/{id}/records"))
KNOWN = {"/v1/ask", "/v1/chat/completions", "/v1/ingest", "/v1/models", HEALTH, "/metrics", "/v1/sessions"}


def endpoint_label(path: str) -> str:
    """A bounded set of metric labels: the route, with session ids folded, else "other"."""
    if path in KNOWN:
        return path
    for pattern, label in _SESSION_PATHS:
        if pattern.fullmatch(path):
            return label
    return "other"


async def send_error(send, status: int, message: str, headers: list | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class MetricsMiddleware:
    def __init__(self, app, metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500

        async def record_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            self.metrics.request(endpoint_label(scope["path"]), status)


class InternalErrorMiddleware:
    """An unexpected exception becomes a 500 with a one-line JSON error (logged with its traceback);
    caught here, it never reaches uvicorn, which would drop the client's connection."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watch(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:  # noqa: BLE001 - the one place every other error ends
            status, body = error_body(exc)
            if started:  # a stream already under way: it ends short
                log.error("error after the response started: %s", exc)
                return
            await send_error(send, status, body["error"])


class ApiKeyMiddleware:
    """`Authorization: Bearer KEY` on every path but the health check."""

    def __init__(self, app, api_key: str):
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] == HEALTH:
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization", b"")
        if not hmac.compare_digest(given, self.expected):
            return await send_error(send, 401, "Missing or wrong API key: send the header "
                                               "`Authorization: Bearer KEY` (the server's --api-key).",
                                    [(b"www-authenticate", b"Bearer")])
        return await self.app(scope, receive, send)


class BodyLimitMiddleware:
    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    def _too_large(self, send, size: int):
        return send_error(send, 413, f"Request body of {size} bytes or more is over this server's limit of "
                                     f"{self.max_bytes} bytes (--max-body-kb); send less.")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(send, int(declared))
        parts, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before sending its body
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            if size > self.max_bytes:
                return await self._too_large(send, size)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()  # later reads: the client's disconnect
            replayed = True
            return {"type": "http.request", "body": b"".join(parts), "more_body": False}

        return await self.app(scope, replay, send)
