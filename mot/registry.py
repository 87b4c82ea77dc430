"""Where translators live and how ask/eval find the one for an (encoder, generator) pair.

Searched in order: $CAG_HOME/translators/ (what `cag train` installs) and the repository's
shipped `translators/` folder. A file is NAME.safetensors + NAME.json; it is chosen by the
fingerprints recorded in its JSON (never by name alone), so a stale translator is never used.
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from cag.home import cag_home
from cag.records import install_checkpoint

log = logging.getLogger(__name__)
SHIPPED = Path(__file__).resolve().parent.parent / "translators"


def translator_dirs() -> list[Path]:
    return [cag_home() / "translators", SHIPPED]


def file_stem(source: str, target: str, kind: str) -> str:
    clean = lambda name: "".join(c if c.isalnum() or c in ".-" else "_" for c in Path(name).name)
    return f"{clean(source)}__{clean(target)}__{kind}"


@dataclass
class Found:
    path: Path | None  # the .safetensors file, or None
    reason: str  # why none was found (for messages)
    record: dict | None = None


def _records(kind: str):
    """(path, record) of every readable translator record of `kind`, in search order."""
    for folder in translator_dirs():
        for path in sorted(folder.glob("*.json")):
            try:
                record = json.loads(path.read_text())
                if record["spec"].get("kind") == kind:
                    yield path, record
            except (OSError, json.JSONDecodeError, KeyError):
                log.warning("ignoring unreadable translator record %s", path)


def find_translator(source_fingerprint: str, target_fingerprint: str, kind: str,
                    source_name: str = "the encoder", target_name: str = "the generator") -> Found:
    stale = []
    for path, record in _records(kind):
        spec = record["spec"]
        if (spec["source"]["fingerprint"], spec["target"]["fingerprint"]) == (source_fingerprint, target_fingerprint):
            return Found(path.with_name(path.name[:-len(".json")] + ".safetensors"), "", record)
        if (spec["source"]["name"], spec["target"]["name"]) == (source_name, target_name):
            stale.append(path)
    if stale:
        return Found(None, f"the {kind} translator {stale[0]} was trained for other versions of "
                           f"{source_name} / {target_name} (fingerprint mismatch): retrain it with "
                           f"`cag train --source {source_name} --target {target_name} --kind {kind}`")
    return Found(None, f"no {kind} translator from {source_name} to {target_name}: train one with "
                       f"`cag train --source {source_name} --target {target_name} --kind {kind}`")


def translators_of_kind(kind: str) -> list[Path]:
    """Records of this kind on disk (a cheap look before loading models to compare fingerprints)."""
    return [path for path, _ in _records(kind)]


def install(checkpoint: Path, source: str, target: str, kind: str) -> Path:
    """Copy a trained checkpoint (NAME.safetensors + NAME.json) into $CAG_HOME/translators/."""
    return install_checkpoint(checkpoint, cag_home() / "translators", file_stem(source, target, kind))
