"""Cache spaces and the files under `STORE/caches/`, read without ever following a symlink below it.

    caches/<space>/model.json                    the CacheSpace (16 hex digits: `CacheSpace.key`)
    caches/<space>/<kk>/<key>.safetensors        chunk caches (64 hex digits; kk = its first two)
    .tmp-* beside them                           temporary files of atomic writes (a killed run's)

Anything else there (a symlink, a file of another name, a folder at another depth) is not cag's:
it is reported and never deleted. `caches/` itself may be a symlink to a folder (the caches moved
to a bigger disk): it is walked as the caches' root, and nothing below it is followed.
"""

import enum
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cag.kv.chunk_cache import FORMAT_VERSION, ids_sha256
from cag.translations import TranslationId

_SPACE_DIR = re.compile(r"^[0-9a-f]{16}$")
_SHARD_DIR = re.compile(r"^[0-9a-f]{2}$")
_CACHE_FILE = re.compile(r"^([0-9a-f]{64})\.safetensors$")
_TEMP_FILE = re.compile(r"^\.tmp-(model\.json|[0-9a-f]{64}\.safetensors)\..+$")


class Role(enum.StrEnum):
    """Whose caches a space holds."""

    ENCODER = "encoder"  # the store's encoder's (what translators read)
    NATIVE = "native"  # a generator's own (`cag ingest --also-for`)
    TRANSLATED = "translated"  # a generator's, made from the encoder's by a translator


@dataclass(frozen=True)
class CacheSpace:
    """Where one model's chunk caches (prefilled after one native prefix) live in a store."""

    model_name: str  # for display: a translated space is named by its TranslationId
    model_fingerprint: str  # a translated space: sha256(translator fingerprint | generator fingerprint)
    prefix_sha256: str
    role: Role
    generator: str = ""  # the model that reads these caches ("" for the encoder's)
    source: str = ""  # translated: the model whose caches were translated
    kind: str = ""  # translated: the translator kind (cag.translations.TranslatorKind)

    def __post_init__(self):
        object.__setattr__(self, "role", Role(self.role))  # a role's name is accepted (model.json)

    @classmethod
    def from_json(cls, data: dict) -> "CacheSpace":
        """Read a space's model.json; those written before the generator/source/kind fields get
        them from the display name they were folded into (then "GEN <- SOURCE (KIND)")."""
        if "generator" not in data:
            name, role = data["model_name"], Role(data["role"])
            generator, _, rest = name.partition(" <- ")
            source, _, kind = rest.rstrip(")").rpartition(" (")
            data = {**data, "generator": "" if role is Role.ENCODER else generator,
                    **({"source": source, "kind": kind} if role is Role.TRANSLATED else {})}
        return cls(**data)

    @property
    def translation(self) -> TranslationId | None:
        """What a translated space holds: the encoder's caches translated for its generator."""
        return TranslationId(self.source, self.generator, self.kind) if self.role is Role.TRANSLATED else None

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.model_fingerprint}|{self.prefix_sha256}".encode()).hexdigest()[:16]

    def file_key(self, text_sha256: str) -> str:
        raw = f"{self.model_fingerprint}|{self.prefix_sha256}|{text_sha256}|{FORMAT_VERSION}"
        return hashlib.sha256(raw.encode()).hexdigest()

    def mismatch(self, meta, text_sha256: str) -> str | None:
        """Why a chunk cache's metadata (ChunkMeta) is not this space's cache of the text with digest
        `text_sha256` (None: it is). A translated space's model is the translator pair; its caches
        carry the generator's fingerprint."""
        if meta.text_sha256 != text_sha256:
            return "it holds another text"
        if (meta.prefix_sha256 or ids_sha256(())) != self.prefix_sha256:
            return "it was prefilled after another prefix"
        if self.role is not Role.TRANSLATED and meta.model_fingerprint != self.model_fingerprint:
            return f"it was prefilled by {meta.model_name} ({meta.model_fingerprint[:12]})"
        return None


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    kind: str  # "cache", "temp", "model" (a space's model.json) or "other" (not cag's: never deleted)
    space_key: str | None = None  # the space folder it is in (cache, temp, model)

    @property
    def file_key(self) -> str | None:
        """A cache file's key (its name without the suffix)."""
        return self.path.name[:64] if self.kind == "cache" else None


def _is_dir(entry: os.DirEntry) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _is_file(entry: os.DirEntry) -> bool:
    return entry.is_file(follow_symlinks=False)


def walk_caches(caches: Path, space_key: str | None = None) -> Iterator[CacheEntry]:
    """Every entry under `caches` (only the space `space_key`'s folder, if given), classified by the
    layout above; symlinks below `caches` are never followed (a symlink is "other", whatever it
    points at)."""
    if not caches.is_dir():
        return
    with os.scandir(caches) as spaces:
        for space in sorted(spaces, key=lambda e: e.name):
            if space_key is not None and space.name != space_key:
                continue
            if not (_is_dir(space) and _SPACE_DIR.match(space.name)):
                yield CacheEntry(Path(space.path), "other")
                continue
            yield from _walk_space(Path(space.path), space.name)


def space_descriptions(caches: Path) -> Iterator[Path]:
    """The model.json of every space folder under `caches`, in key order, without walking the
    spaces' cache files (every ask looks its spaces up: a store of a million chunks has a million
    files there)."""
    if not caches.is_dir():
        return
    with os.scandir(caches) as spaces:
        for space in sorted(spaces, key=lambda e: e.name):
            if _is_dir(space) and _SPACE_DIR.match(space.name):
                path = Path(space.path) / "model.json"
                if path.is_file() and not path.is_symlink():
                    yield path


def _walk_space(folder: Path, key: str) -> Iterator[CacheEntry]:
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            path = Path(entry.path)
            if entry.name == "model.json" and _is_file(entry):
                yield CacheEntry(path, "model", key)
            elif _TEMP_FILE.match(entry.name) and _is_file(entry):
                yield CacheEntry(path, "temp", key)
            elif _is_dir(entry) and _SHARD_DIR.match(entry.name):
                yield from _walk_shard(path, key)
            else:
                yield CacheEntry(path, "other", key)


def _walk_shard(folder: Path, key: str) -> Iterator[CacheEntry]:
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            path = Path(entry.path)
            name = _CACHE_FILE.match(entry.name)
            if name and _is_file(entry) and name.group(1)[:2] == folder.name:
                yield CacheEntry(path, "cache", key)
            elif _TEMP_FILE.match(entry.name) and _is_file(entry):
                yield CacheEntry(path, "temp", key)
            else:
                yield CacheEntry(path, "other", key)


def files_bytes(folder: Path) -> int:
    """Bytes of the regular files under `folder`, not following symlinks."""
    total = 0
    for root, _, files in os.walk(folder):  # (os.walk does not descend into symlinked folders)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total
