"""Start a server: bind the socket first (a port in use is a one-line error before minutes of
loading), warm the models up, then serve with uvicorn until interrupted."""

import logging
import socket
from collections.abc import Callable

import uvicorn

from cag.errors import CagError
from cag.server.app import build_app
from cag.server.config import ServeConfig
from cag.server.service import CagServer

log = logging.getLogger(__name__)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CagError(f"Cannot listen on {host}:{port} ({exc.strerror}): choose another --port or --host.") from exc
    sock.set_inheritable(True)
    return sock


def serve(config: ServeConfig, on_ready: Callable[[CagServer, str, float], None] | None = None) -> None:
    """Serve until interrupted; `on_ready(server, url, warm_up_seconds)` once the models are warm."""
    config.check()
    sock = bind(config.host, config.port)
    server = None
    try:
        server = CagServer(config)
        seconds = server.warm_up() if config.warm_up else 0.0
    except BaseException:
        if server is not None:
            server.close()
        sock.close()
        raise
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    if on_ready:
        on_ready(server, url, seconds)
    uvicorn_config = uvicorn.Config(build_app(server), log_config=None, access_log=False, timeout_graceful_shutdown=10)
    uvicorn.Server(uvicorn_config).run(sockets=[sock])
