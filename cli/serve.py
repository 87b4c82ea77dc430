"""`cag serve`: models kept warm behind an HTTP API."""

import typer

from cag.server.config import ServeConfig
from cli._errors import handle_errors
from cli.config_options import with_config


@handle_errors
@with_config(ServeConfig, ("store", "host", "port", "models", "max_loaded", "api_key", "ingest_roots",
                           "max_body_bytes", "min_retention", "warm_up", "memory_tier_mb", "device", "dtype"))
def serve_command(config: ServeConfig = None) -> None:
    """Serve a store over HTTP: /v1/ask, /v1/chat/completions (OpenAI-compatible), /v1/ingest,
    /v1/sessions (conversations whose history moves between models as caches), /v1/models,
    /v1/health, /metrics. See docs/serving.md."""
    from cag.server.run import serve

    serve(config, on_ready=_ready)


def _ready(server, url: str, seconds: float) -> None:
    typer.echo(f"cag serve: store {server.store_dir}, models {', '.join(server.config.models)} "
               f"(warm in {seconds:.1f} s); listening on {url}"
               + (" (API key required)" if server.config.api_key else ""), err=True)
