"""`cag serve`: models kept warm behind an HTTP API."""

from pathlib import Path
from typing import Annotated

import typer

from cag.defaults import DEFAULT_GENERATOR, DEFAULT_MIN_RETENTION
from cli._errors import handle_errors
from cli.options import DeviceOption, DtypeOption, StoreOption


@handle_errors
def serve_command(
    store: StoreOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on (another than 127.0.0.1 exposes the "
                                           "server: set --api-key).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    models: Annotated[str, typer.Option(
        "--models", envvar="CAG_MODEL", help="Comma-separated generators to serve; the first is the default "
                                             "of requests that name none. The store's encoder is always "
                                             "served too (ingest, session memory).")] = DEFAULT_GENERATOR,
    max_loaded: Annotated[int, typer.Option(min=1, help="Models loaded at once; past it the least recently "
                                                        "used is unloaded.")] = 2,
    api_key: Annotated[str | None, typer.Option(
        envvar="CAG_API_KEY", show_envvar=True,
        help="Require `Authorization: Bearer KEY` on every endpoint but /v1/health.")] = None,
    ingest_root: Annotated[list[Path] | None, typer.Option(
        "--ingest-root", help="A folder POST /v1/ingest may read (repeatable; none: uploaded text only).")] = None,
    max_body_kb: Annotated[int, typer.Option(min=1, help="Largest request body accepted (413 past it).")] = 8192,
    min_retention: Annotated[float, typer.Option(help="--mode auto's quality gate (as `cag ask`).")]
    = DEFAULT_MIN_RETENTION,
    warm_up: Annotated[bool, typer.Option(help="Load and warm the models before serving.")] = True,
    device: DeviceOption = "auto",
    dtype: DtypeOption = "auto",
) -> None:
    """Serve a store over HTTP: /v1/ask, /v1/chat/completions (OpenAI-compatible), /v1/ingest,
    /v1/sessions (conversations whose history moves between models as caches), /v1/models,
    /v1/health, /metrics. See docs/serving.md."""
    from cag.server.config import ServeConfig
    from cag.server.run import serve

    config = ServeConfig(store=store, host=host, port=port,
                         models=tuple(m.strip() for m in models.split(",") if m.strip()),
                         max_loaded=max_loaded, api_key=api_key or None,
                         ingest_roots=tuple(str(p) for p in ingest_root or ()), max_body_bytes=max_body_kb * 1024,
                         min_retention=min_retention, device=device, dtype=dtype, warm_up=warm_up)
    serve(config, on_ready=_ready)


def _ready(server, url: str, seconds: float) -> None:
    typer.echo(f"cag serve: store {server.store_dir}, models {', '.join(server.config.models)} "
               f"(warm in {seconds:.1f} s); listening on {url}"
               + (" (API key required)" if server.config.api_key else ""), err=True)
