"""Server tests: one store of the test corpus (tiny encoder, tiny generator's own caches, a tiny
MoT translator between them), served by a real uvicorn on loopback in a thread."""

import threading
import time
from pathlib import Path

import pytest
import torch

from cag.ingest.pipeline import IngestOptions, ingest
from cag.models import load_model
from cag.server.app import build_app
from cag.server.config import ServeConfig
from cag.server.run import bind
from cag.server.service import CagServer

CORPUS = {
    "lobster.md": "# Lobster\n\nThe European lobster may grow to a length of 60 cm. It is blue in life and red "
                  "after cooking. " * 3,
    "mountain.txt": "Mount Elbert is the highest summit of the Rocky Mountains, at 14,440 feet. It was named "
                    "after Samuel Hitt Elbert. " * 3,
    "storm.txt": "Hurricane Beatriz formed in June 2011 near Mexico and caused four deaths. " * 3,
}


@pytest.fixture(scope="session")
def server_home(tmp_path_factory):
    return tmp_path_factory.mktemp("server_home")


@pytest.fixture(autouse=True)
def cag_home(server_home, monkeypatch):
    """The server tests share one cag home: the live server finds the tiny translator there."""
    monkeypatch.setenv("CAG_HOME", str(server_home))
    return server_home


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in CORPUS.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="session")
def served_store(tiny_models, server_home, tmp_path_factory):
    """A store of CORPUS (encoder caches and the generator's own, in fp32: the tiny models' answers
    are compared exactly), and a tiny MoT translator (random weights: its answers are noise, its
    plumbing is real) installed in the cag home."""
    from mot.checkpoint import save_translator
    from cag.translations import TranslationId
    from mot.translator import Translator, make_spec

    root = tmp_path_factory.mktemp("served")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAG_HOME", str(server_home))
        ingest([write_corpus(root / "corpus")], root / "store",
               IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32, also_for=(tiny_models["generator"],),
                             cache_dtype="fp32"))
        encoder, generator = load_model(tiny_models["encoder"]), load_model(tiny_models["generator"])
        torch.manual_seed(0)
        translator = Translator(make_spec("mot", encoder, generator))
        save_translator(translator, server_home / "translators" / TranslationId(encoder.name, generator.name, "mot").file_stem)
    return root / "store"


class LiveServer:
    """A CagServer behind a real uvicorn on 127.0.0.1 (a free port), in a thread."""

    def __init__(self, config: ServeConfig, home: Path):
        import uvicorn

        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("CAG_HOME", str(home))
            self.server = CagServer(config)
            self.server.warm_up()
        sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._uvicorn = uvicorn.Server(uvicorn.Config(build_app(self.server), log_config=None, access_log=False))
        self._thread = threading.Thread(target=self._uvicorn.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.time() + 30
        while not self._uvicorn.started:
            assert time.time() < deadline and self._thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)

    def close(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(timeout=30)


@pytest.fixture(scope="session")
def start_server(server_home):
    """start_server(ServeConfig) -> a LiveServer, closed at the end of the session."""
    started = []

    def start(config: ServeConfig) -> LiveServer:
        started.append(LiveServer(config, server_home))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="session")
def live(served_store, tiny_models, start_server, tmp_path_factory):
    """The default test server: the tiny generator served (and the store's encoder), ingest allowed
    under one root."""
    roots = tmp_path_factory.mktemp("ingest_root")
    server = start_server(ServeConfig(store=served_store, port=0, models=(tiny_models["generator"],), max_loaded=3,
                                      ingest_roots=(str(roots),), max_body_bytes=64 * 1024, max_new_tokens=64))
    server.ingest_root = roots
    return server


def parse_events(text: str) -> list[tuple[str, dict]]:
    """(event, data) of a server-sent event stream (data as JSON)."""
    import json

    found = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((fields.get("event", "message"), json.loads(fields["data"])))
    return found


@pytest.fixture
def sse_events():
    return parse_events


@pytest.fixture
def client(live):
    import httpx

    with httpx.Client(base_url=live.url, timeout=60) as http:
        yield http
