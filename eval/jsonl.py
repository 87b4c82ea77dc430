"""JSON Lines files, plain or gzip-compressed: a run folder writes `predictions.jsonl`, a kept run
record (`records/`) holds it as `predictions.jsonl.gz`; readers take either through `resolve`."""

import gzip
import json
from pathlib import Path

from cag.atomic import atomic_write_bytes

GZ = ".gz"


def resolve(path: Path) -> Path:
    """`path`, or its twin with `.gz` added or removed when only the twin exists; `path` itself when
    neither does (so the caller's error names the file it asked for)."""
    path = Path(path)
    if path.exists():
        return path
    twin = path.with_name(path.name[:-len(GZ)] if path.name.endswith(GZ) else path.name + GZ)
    return twin if twin.exists() else path


def read_text(path: Path) -> str:
    """The text of `path` or of its gzip twin (`resolve`), decompressed when it ends in .gz."""
    path = resolve(path)
    if path.name.endswith(GZ):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text(encoding="utf-8")


def read_records(path: Path) -> list[dict]:
    """One dict per non-empty line of a JSON Lines file, plain or gzip-compressed."""
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no file name and mtime 0: the same bytes give the same file, run after run."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def write_gz(path: Path, text: str) -> None:
    """Write `text` gzip-compressed (deterministic, `gzip_bytes`) to `path`, which ends in .gz; a
    crash leaves the old file or the new one, never a part."""
    if not Path(path).name.endswith(GZ):
        raise ValueError(f"{path}: a gzip file's name ends in {GZ}")
    atomic_write_bytes(Path(path), gzip_bytes(text.encode("utf-8")))
