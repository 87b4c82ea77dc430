"""The server's settings: one frozen dataclass that checks itself on construction, before anything
loads (`cag serve`'s options come from its fields)."""

from dataclasses import dataclass
from pathlib import Path

from cag.defaults import DEFAULT_GENERATOR, DEFAULT_MIN_RETENTION
from cag.errors import CagError
from cag.models.loading import check_dtype, device_setting, dtype_setting
from cag.settings import comma_list, setting


@dataclass(frozen=True)
class ServeConfig:
    store: Path | None = setting(None, "Store folder (default: $CAG_HOME/stores/default).", envvar="CAG_STORE")
    host: str = setting("127.0.0.1", "Address to listen on (another than 127.0.0.1 exposes the server: set "
                        "--api-key).")
    port: int = setting(8000, "Port to listen on.")
    models: tuple = setting((DEFAULT_GENERATOR,), "Comma-separated generators to serve; the first is the default of "
                            "requests that name none. The store's encoder is always served too (ingest, session "
                            "memory).", envvar="CAG_MODEL", cli_type=str, parse=comma_list, show=",".join)
    max_loaded: int = setting(2, "Models loaded at once; past it the least recently used is unloaded.", minimum=1)
    api_key: str | None = setting(None, "Require `Authorization: Bearer KEY` on every endpoint but /v1/health.",
                                  envvar="CAG_API_KEY", parse=lambda key: key or None)
    ingest_roots: tuple = setting((), "A folder POST /v1/ingest may read (repeatable; none: uploaded text only).",
                                  flag="--ingest-root", cli_type=list[Path] | None,
                                  parse=lambda roots: tuple(str(p) for p in roots or ()), show=lambda d: None)
    max_body_bytes: int = setting(8 * 1024 * 1024, "Largest request body accepted, in KB (413 past it).",
                                  flag="--max-body-kb", cli_type=int, minimum=1, parse=lambda kb: kb * 1024,
                                  show=lambda size: size // 1024)
    min_retention: float = setting(DEFAULT_MIN_RETENTION, "--mode auto's quality gate (as `cag ask`).")
    device: str = device_setting()
    dtype: str = dtype_setting()
    warm_up: bool = setting(True, "Load and warm the models before serving.")
    memory_tier_mb: int = setting(1024, "Decoded chunk caches (the generators' own and stored translations) kept in "
                                  "memory, least recently used out past this many MB: a hot chunk skips the disk, "
                                  "its checksum and its decode. 0: none.", minimum=0)
    max_top_k: int = 64
    max_new_tokens: int = 1024
    worker_threads: int = 64  # threads waiting on model queues at once (HTTP requests in flight)

    def __post_init__(self):
        self.check()

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
        check_dtype(self.dtype)
        return self
