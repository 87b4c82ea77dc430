"""The FastAPI application over a warmed `CagServer`: routes, error answers, middleware."""

import contextlib
import logging

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

import cag
from cag.errors import CagError
from cag.server.errors import error_body, one_line
from cag.server.middleware import ApiKeyMiddleware, BodyLimitMiddleware, InternalErrorMiddleware, MetricsMiddleware
from cag.server.routes import router
from cag.server.service import CagServer
from cag.server.session_routes import session_router

log = logging.getLogger(__name__)


def build_app(server: CagServer) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app):
        # threads that wait on the models' queues: one per request in flight
        anyio.to_thread.current_default_thread_limiter().total_tokens = server.config.worker_threads
        yield
        server.close()

    app = FastAPI(title="cag", version=cag.__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.include_router(router(server))
    app.include_router(session_router(server))
    _error_handlers(app)
    # added innermost first: the body limit, the key, the catch-all, the metrics around everything
    app.add_middleware(BodyLimitMiddleware, max_bytes=server.config.max_body_bytes)
    if server.config.api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=server.config.api_key)
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=server.metrics)
    app.state.server = server
    return app


def is_json_type(content_type: str | None) -> bool:
    """Whether a Content-Type names JSON (application/json, application/...+json)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CagError)
    async def cag_error(request: Request, exc: CagError):
        status, body = error_body(exc)
        return JSONResponse(body, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError):
        sent = request.headers.get("content-type")
        if exc.body and not is_json_type(sent):
            # (refused, not read as JSON anyway: a page in a browser can send a cross-site form or
            # text/plain POST to a local server without asking first, but not an application/json one)
            return JSONResponse({"error": f"The request body must be JSON, sent with the header Content-Type: "
                                          f"application/json (it came with {one_line(sent) if sent else 'none'}); "
                                          "with curl: -H 'Content-Type: application/json'."}, status_code=415)
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            return JSONResponse({"error": one_line(f"Malformed JSON body: {first.get('msg', '')} "
                                                   f"at position {first.get('loc', ['', '?'])[-1]}.")}, status_code=400)
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: "
                             f"{e.get('msg', 'invalid')}" for e in errors[:5])
        return JSONResponse({"error": one_line(f"Invalid request: {problems}.")}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        words = {404: f"Not found: {request.url.path}", 405: f"Method {request.method} not allowed on {request.url.path}"}
        return JSONResponse({"error": words.get(exc.status_code, one_line(exc.detail))}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))
