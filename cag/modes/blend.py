"""Blend modes: another mode's cached context with a share of its tokens (ModeOptions.blend)
recomputed by the generator over all its layers, attending to the stored K/V of the others
(CacheBlend-style repair of translation errors and of the attention missing between independently
prefilled chunks; cag.kv.blend)."""

import time

from cag.kv.blend import blend
from cag.modes.base import BuiltContext, ContextMode, ContextRequest
from cag.modes.registry import get_mode


class BlendMode(ContextMode):
    """`name` = the `base` mode's context, blended."""

    recomputes = True

    def __init__(self, name: str, base: str):
        self.name, self.base_name = name, base
        self.help = f"{base}, with a share of the context tokens (--blend) recomputed by the generator"

    @property
    def base(self) -> ContextMode:
        return get_mode(self.base_name)  # by name: the base may be registered after this mode

    @property
    def reads(self) -> str:
        return self.base.reads

    @property
    def translator_kind(self) -> str | None:
        return self.base.translator_kind

    def reader_identity(self, store, lm):
        return self.base.reader_identity(store, lm)

    def prepare(self, store, lm) -> None:
        self.base.prepare(store, lm)

    def missing(self, store, lm, rows: list) -> str | None:
        return self.base.missing(store, lm, rows)

    def build(self, request: ContextRequest) -> BuiltContext:
        built = self.base.build(request)
        start = time.perf_counter()
        if built.context is not None:
            blend(request.lm, built.context, request.options.blend, request.options.blend_select,
                  question_ids=request.question_ids)
        request.timings["blend"] = (time.perf_counter() - start) * 1e3
        return built
