"""The store's FAISS index on disk: `index.faiss` and its sidecar `index.json` (the IndexInfo plus
the sha256 of `index.faiss`'s bytes). Both are written atomically, the index first, so a crash
between the two leaves a sidecar whose digest does not match: like a missing, unreadable or damaged
index, that loads as None and the store rebuilds it from the catalog."""

import json
import logging
from dataclasses import asdict
from pathlib import Path

from cag.atomic import atomic_write_bytes, atomic_write_text
from cag.models.fingerprint import sha256_hex
from indexes.faiss_index import IndexInfo, VectorIndex

log = logging.getLogger(__name__)
INDEX_FILE, SIDECAR = "index.faiss", "index.json"


def save_index(folder: Path, index: VectorIndex) -> None:
    data = index.to_bytes()
    atomic_write_bytes(Path(folder) / INDEX_FILE, data)
    atomic_write_text(Path(folder) / SIDECAR, json.dumps({**asdict(index.info), "sha256": sha256_hex(data)},
                                                         indent=2))


def read_index(folder: Path) -> VectorIndex:
    """The saved index, verified against its digest; ValueError (saying what is wrong) otherwise."""
    folder = Path(folder)
    if not (folder / INDEX_FILE).is_file() or not (folder / SIDECAR).is_file():
        raise ValueError("the FAISS index is missing")
    try:
        sidecar = json.loads((folder / SIDECAR).read_text())
        if not isinstance(sidecar, dict):
            raise ValueError(f"a JSON {type(sidecar).__name__}, not an object")
        digest = sidecar.pop("sha256", None)
        info = IndexInfo(**sidecar)
        data = (folder / INDEX_FILE).read_bytes()
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"the FAISS index's sidecar is unreadable ({exc})") from exc
    if digest is None:
        raise ValueError("index.json records no digest (a store from an earlier cag)")
    if digest != sha256_hex(data):
        raise ValueError("the FAISS index does not match the digest in index.json")
    return VectorIndex.from_bytes(data, info)


def load_index(folder: Path) -> VectorIndex | None:
    """The saved index, verified; None when it must be rebuilt (missing, damaged: logged)."""
    try:
        return read_index(folder)
    except ValueError as exc:
        if (Path(folder) / INDEX_FILE).exists():
            log.warning("%s in %s; rebuilding it from the catalog", exc, folder)
        return None
