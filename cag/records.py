"""A checkpoint's two files (NAME.safetensors + the JSON record beside it): their paths, installing
them, and reading the record (refused when its format is not the one this version writes)."""

import json
import shutil
from pathlib import Path

from cag.errors import CagError


def read_checkpoint_record(path: Path, format_version: int, what: str, retrain: str) -> dict:
    """The record at `path` (`what`: "translator"; `retrain`: the command that
    makes a new one), or a one-line CagError."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CagError(f"Cannot read {what} record {path}: {exc}") from exc
    if record.get("spec", {}).get("format_version") != format_version:
        raise CagError(f"{what[0].upper()}{what[1:]} {path} has another checkpoint format; retrain it with `{retrain}`.")
    return record


def checkpoint_paths(path) -> tuple[Path, Path]:
    """(NAME.safetensors, NAME.json) for NAME, NAME.safetensors or NAME.json. Names may hold dots
    ("qwen2.5"), so suffixes are added, never swapped with Path.with_suffix."""
    path = Path(path)
    name = path.name
    for suffix in (".safetensors", ".json"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return path.with_name(name + ".safetensors"), path.with_name(name + ".json")


def install_checkpoint(checkpoint: Path, folder: Path, stem: str) -> Path:
    """Copy a checkpoint's two files into `folder` as STEM.safetensors + STEM.json, each through a
    temporary file (a reader never sees half a copy); the installed weights' path."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, source in zip((".safetensors", ".json"), checkpoint_paths(checkpoint)):
        tmp = folder / f".tmp-{stem}{suffix}"
        shutil.copyfile(source, tmp)
        tmp.replace(folder / f"{stem}{suffix}")
    return folder / f"{stem}.safetensors"
