"""The server's settings: one frozen dataclass, checked once (`check`) before anything loads."""

from dataclasses import dataclass
from pathlib import Path

from cag.defaults import DEFAULT_GENERATOR, DEFAULT_MIN_RETENTION
from cag.errors import CagError


@dataclass(frozen=True)
class ServeConfig:
    store: Path | None = None  # None: $CAG_HOME/stores/default
    host: str = "127.0.0.1"
    port: int = 8000
    models: tuple = (DEFAULT_GENERATOR,)  # generators served; the first is the default
    max_loaded: int = 2  # models kept loaded at once (least recently used unloaded past it)
    api_key: str | None = None  # every endpoint but /v1/health needs `Authorization: Bearer KEY` ($CAG_API_KEY)
    ingest_roots: tuple = ()  # folders /v1/ingest may read (none: uploaded text only)
    max_body_bytes: int = 8 * 1024 * 1024
    min_retention: float = DEFAULT_MIN_RETENTION  # --mode auto's quality gate
    device: str = "auto"
    dtype: str = "auto"
    warm_up: bool = True  # load and warm the models, the embedder and translators before serving
    max_top_k: int = 64
    max_new_tokens: int = 1024
    worker_threads: int = 64  # threads waiting on model queues at once (HTTP requests in flight)

    @property
    def default_model(self) -> str:
        return self.models[0]

    def check(self) -> "ServeConfig":
        """Refuse settings that cannot work, naming the fix; return self."""
        if not self.models:
            raise CagError("--models is empty: name at least one generator (e.g. qwen2.5-coder-0.5b).")
        if self.max_loaded < 1:
            raise CagError(f"--max-loaded must be at least 1 (got {self.max_loaded}).")
        if not 0 <= self.port <= 65535:
            raise CagError(f"--port must be 0-65535 (got {self.port}).")
        if self.api_key is not None and len(self.api_key) < 8:
            raise CagError("--api-key is too short: use at least 8 characters (e.g. `openssl rand -hex 16`).")
        if self.max_body_bytes < 1024:
            raise CagError(f"--max-body-kb must be at least 1 (got {self.max_body_bytes} bytes).")
        for root in self.ingest_roots:
            if not Path(root).is_dir():
                raise CagError(f"--ingest-root {root} is not a folder.")
        return self
