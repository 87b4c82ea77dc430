"""Blend modes: another mode's cached context with a share of its tokens (ModeOptions.blend)
recomputed by the generator over all its layers, attending to the stored K/V of the others
(CacheBlend-style repair of translation errors and of the attention missing between independently
prefilled chunks; cag.kv.blend). The build chooses the tokens (timings `blend`); they are
recomputed in the generator's prefill of the question, in the same forward (timings `prefill`)."""

from cag.kv.blend import blend
from cag.modes.base import BuiltContext, ContextRequest
from cag.modes.derived import DerivedMode


class BlendMode(DerivedMode):
    """`name` = the `base` mode's context, blended."""

    recomputes = True
    computes = "the question twice and the recomputed share of the context"

    def __init__(self, name: str, base: str):
        super().__init__(name, base)
        self.help = f"{base}, with a share of the context tokens (--blend) recomputed by the generator"

    def build(self, request: ContextRequest) -> BuiltContext:
        built = self.base.build(request)
        with built.timings.measure("blend"):
            if built.context is not None:
                blend(request.lm, built.context, request.options.blend, request.options.blend_select,
                      question_ids=request.question_ids, defer=True)
        return built
