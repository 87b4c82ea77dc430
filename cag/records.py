"""The JSON record saved beside a checkpoint's safetensors weights (translators, reader adapters):
read, and refused when its format is not the one this version writes."""

import json
from pathlib import Path

from cag.errors import CagError


def read_checkpoint_record(path: Path, format_version: int, what: str, retrain: str) -> dict:
    """The record at `path` (`what`: "translator", "reader adapter"; `retrain`: the command that
    makes a new one), or a one-line CagError."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CagError(f"Cannot read {what} record {path}: {exc}") from exc
    if record.get("spec", {}).get("format_version") != format_version:
        raise CagError(f"{what[0].upper()}{what[1:]} {path} has another checkpoint format; retrain it with `{retrain}`.")
    return record
