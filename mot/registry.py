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
from cag.translations import TranslationId, TranslatorKind

log = logging.getLogger(__name__)
SHIPPED = Path(__file__).resolve().parent.parent / "translators"


def translator_dirs() -> list[Path]:
    return [cag_home() / "translators", SHIPPED]


@dataclass
class Found:
    path: Path | None  # the .safetensors file, or None
    reason: str  # why none was found (for messages)
    record: dict | None = None


def _records(kind: TranslatorKind):
    """(path, record) of every readable translator record of `kind`, in search order."""
    for folder in translator_dirs():
        for path in sorted(folder.glob("*.json")):
            try:
                record = json.loads(path.read_text())
                if TranslatorKind(record["spec"]["kind"]) is kind:
                    yield path, record
            except (OSError, json.JSONDecodeError, KeyError, ValueError):
                log.warning("ignoring unreadable translator record %s", path)


def find_translator(source_fingerprint: str, target_fingerprint: str, wanted: TranslationId) -> Found:
    """The installed or shipped translator of `wanted`'s kind between the models with these
    fingerprints (`wanted`'s names: for messages, and to tell a stale translator from none)."""
    stale = []
    for path, record in _records(wanted.kind):
        spec = record["spec"]
        if (spec["source"]["fingerprint"], spec["target"]["fingerprint"]) == (source_fingerprint, target_fingerprint):
            return Found(path.with_name(path.name[:-len(".json")] + ".safetensors"), "", record)
        if (spec["source"]["name"], spec["target"]["name"]) == (wanted.source, wanted.generator):
            stale.append(path)
    retrain = f"cag train --source {wanted.source} --target {wanted.generator} --kind {wanted.kind}"
    if stale:
        return Found(None, f"the translator {stale[0]} ({wanted}) was trained for other versions of these "
                           f"models (fingerprint mismatch): retrain it with `{retrain}`")
    return Found(None, f"no translator {wanted}: train one with `{retrain}`")


def translators_of_kind(kind: TranslatorKind) -> list[Path]:
    """Records of this kind on disk (a cheap look before loading models to compare fingerprints)."""
    return [path for path, _ in _records(kind)]


def install(checkpoint: Path, translation: TranslationId) -> Path:
    """Copy a trained checkpoint (NAME.safetensors + NAME.json) into $CAG_HOME/translators/."""
    return install_checkpoint(checkpoint, cag_home() / "translators", translation.file_stem)
