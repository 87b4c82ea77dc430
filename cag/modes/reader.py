"""Reader modes: another mode's context, read by the generator through the reader adapter trained
for what that mode reads (cag.readers): `native+reader` (its own independently prefilled chunks),
and from mot `translated+reader`, `translated-blend+reader` (LoRA readers); `native+links` and
`translated+links` (link-token readers).

The context is built exactly as the base mode builds it (the same stored or translated caches, the
same blend). A LoRA reader is switched on for the question and the answer only; a links reader
adds its learned tokens after every chunk, computed by the unchanged generator before the
question. A mode without an installed reader of its kind for its (what it reads, generator) pair
refuses with the command that trains one.
`--mode auto` uses a reader mode where the retention recorded with the adapter says it helps
(`native_choice` here; the translated gate in mot/modes.py).
"""

import logging
import time
from dataclasses import replace

from cag.errors import CagError
from cag.kv.blend import settle
from cag.modes.base import BuiltContext, ContextMode, ContextRequest
from cag.modes.derived import DerivedMode
from cag.modes.registry import get_mode, mode_names
from cag.readers import attach, find_reader, load_reader
from cag.readers.links import with_links
from cag.readers.lora import check_generator
from cag.records import checkpoint_paths

log = logging.getLogger(__name__)
SUFFIX = "+reader"
LINKS_SUFFIX = "+links"
_LOADED: dict = {}  # (weights path, weights mtime, record mtime) -> Reader


class ReaderMode(DerivedMode):
    """`name` = the `base` mode's context, read with the reader adapter trained for it."""

    def __init__(self, name: str, base: str, kind: str = "lora"):
        super().__init__(name, base)
        self.kind = kind
        self.help = (f"{base}, read through the reader adapter trained for it (`cag train-reader`)" if kind == "lora"
                     else f"{base}, with learned link tokens after every chunk (`cag train-reader --adapter links`)")

    @property
    def recomputes(self) -> bool:
        return self.base.recomputes

    @property
    def uses_window(self) -> bool:
        return self.base.uses_window

    def prepare(self, store, lm) -> None:
        self.base.prepare(store, lm)
        self.adapter(store, lm)

    def missing(self, store, lm, rows: list) -> str | None:
        why = self.base.missing(store, lm, rows)
        if why is None:
            found = self._found(store, lm)
            why = None if found.path is not None else f"Cannot answer in mode {self.name}: {found.reason}."
        return why

    def _found(self, store, lm):
        reads, reads_name = self.base.reader_identity(store, lm)
        return find_reader(reads, lm.fingerprint, reads_name, lm.name, self.kind)

    def adapter(self, store, lm):
        """The reader for this mode's context and `lm` (a LoRA one attached to `lm`, switched off)."""
        found = self._found(store, lm)
        if found.path is None:
            raise CagError(f"Cannot answer in mode {self.name}: {found.reason}.")
        reader = loaded_reader(found.path)
        if reader.spec.kind == "lora":
            attach(lm, reader)
        return reader

    def build(self, request: ContextRequest) -> BuiltContext:
        reader = self.adapter(request.store, request.lm)
        built = self.base.build(request)
        if built.context is not None and built.context.pending is not None:
            # a blend recomputes without the adapter (it reads the question and answer only), and
            # link tokens are computed over the recomputed context: no deferring here
            start = time.perf_counter()
            settle(request.lm, built.context)
            request.timings["blend"] = request.timings.get("blend", 0.0) + (time.perf_counter() - start) * 1e3
        if reader.spec.kind == "lora":
            return replace(built, reader=reader.adapter_name)
        check_generator(request.lm, reader)
        start = time.perf_counter()
        context = with_links(request.lm, built.context, reader.weights["links"]) if built.context else None
        request.timings["links"] = (time.perf_counter() - start) * 1e3
        return replace(built, context=context)


def loaded_reader(path):
    """The reader at `path`, read and verified once per file version."""
    weights, record = checkpoint_paths(path)
    key = (str(weights), weights.stat().st_mtime_ns, record.stat().st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = load_reader(weights)
    return _LOADED[key]


def recorded_gain(record: dict, key: str = "qa") -> tuple[float | None, float | None]:
    """(retention with the adapter, retention of its base mode on the same questions) recorded in a
    reader's JSON under `key`, or Nones."""
    qa = record["spec"].get("metrics", {}).get(key) or {}
    return qa.get("retention"), qa.get("base_retention")


def native_choice(store, lm) -> tuple[ContextMode, str]:
    """The mode `--mode auto` answers from the generator's own caches in: `native+reader` when a
    reader adapter for them is installed and its recorded retention is at least its base mode's on
    the same questions (the adapter helped), else `native`; and why, in words."""
    native = get_mode("native")
    if "native" + SUFFIX not in mode_names():
        return native, ""
    found = find_reader("native", lm.fingerprint, "native", lm.name)
    if found.path is None:
        return native, ""
    retention, base = recorded_gain(found.record)
    name = found.path.name
    if retention is None or base is None:
        return native, f"reader adapter {name} has no recorded QA retention"
    if retention < base:
        return native, f"reader adapter {name} keeps {retention:.2f}, below native's {base:.2f}"
    return get_mode("native" + SUFFIX), f"reader adapter {name} keeps {retention:.2f} (native {base:.2f})"
