"""Where cag keeps converted models, stores and translators: `$CAG_HOME`, default `~/.cache/cag`."""

import os
from pathlib import Path


def cag_home() -> Path:
    """The cag home folder (created on first use)."""
    home = Path(os.environ.get("CAG_HOME") or Path.home() / ".cache" / "cag").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home
