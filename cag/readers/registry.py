"""Where reader adapters live and how a mode finds the one for what it reads.

Searched in order: $CAG_HOME/readers/ (what `cag train-reader` installs) and the repository's
shipped `readers/` folder. A reader is chosen by the fingerprints in its JSON (the generator's, and
"native" or the translator's), never by its file name: one trained for another generator, another
version of it, or another translator is never used.
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from cag.home import cag_home
from cag.readers.checkpoint import NATIVE
from cag.records import checkpoint_paths, install_checkpoint

log = logging.getLogger(__name__)
SHIPPED = Path(__file__).resolve().parents[2] / "readers"


def reader_dirs() -> list[Path]:
    return [cag_home() / "readers", SHIPPED]


@dataclass(frozen=True)
class FoundReader:
    path: Path | None  # the .safetensors file, or None
    reason: str  # why none was found (for messages)
    record: dict | None = None


def _records():
    for folder in reader_dirs():
        for path in sorted(folder.glob("*.json")):
            try:
                record = json.loads(path.read_text())
                record["spec"]["reads"], record["spec"]["generator_fingerprint"]  # noqa: B018  (shape check)
                yield path, record
            except (OSError, json.JSONDecodeError, KeyError, TypeError):
                log.warning("ignoring unreadable reader adapter record %s", path)


def train_command(generator: str, reads_name: str, kind: str = "lora") -> str:
    what = "--reads native" if reads_name == NATIVE else "--reads translated"
    return f"`cag train-reader --generator {generator} {what}{'' if kind == 'lora' else ' --adapter ' + kind}`"


def find_reader(reads: str, generator_fingerprint: str, reads_name: str, generator: str,
                kind: str = "lora") -> FoundReader:
    """The `kind` reader adapter trained for `generator` reading `reads` (NATIVE or a translator's
    fingerprint); else why not, naming a near miss (the same generator name, other fingerprints)."""
    near = None
    for path, record in _records():
        spec = record["spec"]
        if spec.get("kind", "lora") != kind:
            continue
        if (spec["reads"], spec["generator_fingerprint"]) == (reads, generator_fingerprint):
            return FoundReader(checkpoint_paths(path)[0], "", record)
        if near is None and spec.get("generator") == generator:
            near = (path, spec)
    fix = f"train one with {train_command(generator, reads_name, kind)}"
    if near is not None:
        path, spec = near
        other = ("another version of the generator" if spec["generator_fingerprint"] != generator_fingerprint
                 else f"{spec.get('reads_name', 'other caches')}")
        return FoundReader(None, f"the {kind} reader adapter {path} was trained for {other}, not for {reads_name} "
                                 f"read by this {generator}: {fix}")
    return FoundReader(None, f"no {kind} reader adapter for {generator} reading {reads_name}: {fix}")


def install(checkpoint: Path, stem: str) -> Path:
    """Copy a trained reader (NAME.safetensors + NAME.json) into $CAG_HOME/readers/ as STEM."""
    return install_checkpoint(checkpoint, cag_home() / "readers", stem)


def file_stem(generator: str, reads_name: str, kind: str = "lora") -> str:
    clean = lambda name: "".join(c if c.isalnum() or c in ".-" else "_" for c in Path(name).name)  # noqa: E731
    suffix = "reader" if kind == "lora" else kind
    if reads_name == NATIVE:
        return f"{clean(generator)}__native__{suffix}"
    source = reads_name.split(" -> ")[0]
    translator = reads_name.rpartition("(")[2].rstrip(")") or "mot"
    return f"{clean(source)}__{clean(generator)}__{translator}__{suffix}"
