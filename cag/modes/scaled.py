"""Scaled modes: another mode's cached context, read with the context's share of the generator's
attention multiplied by ModeOptions.context_scale (`native-scaled`; from mot, `translated-scaled`).

Nothing is trained and nothing is recomputed: every token the generator reads after the context
(question and answer) adds log(scale) to its attention logits over the chunks' positions, in every
layer (cag.kv.generate.context_mask). A generator reading many independently prefilled chunks
attends to them more than it would to the same text read in one pass; a scale below 1 gives that
attention back to the prefix and the question (APE's scaling factor, Yang et al. 2025). The stored
caches are unchanged, so the scale is chosen per question at no cost. A context of one chunk is left
as it is: a chunk prefilled after the generator's prefix reads exactly as its text.
"""

import math

from cag.errors import CagError
from cag.kv.geometry import keeps_every_position
from cag.modes.base import BuiltContext, ContextRequest
from cag.modes.derived import DerivedMode


def check_context_scale(scale: float) -> None:
    if not (scale > 0.0 and math.isfinite(scale)):
        raise CagError(f"--context-scale must be a positive number (1 leaves attention unchanged), not {scale}.")


class ScaledMode(DerivedMode):
    """`name` = the `base` mode's context, its share of attention scaled."""

    scales = True

    def __init__(self, name: str, base: str):
        super().__init__(name, base)
        self.help = f"{base}, with the context's share of attention scaled (--context-scale)"

    def build(self, request: ContextRequest) -> BuiltContext:
        check_context_scale(request.options.context_scale)
        built = self.base.build(request)
        context = built.context
        if context is not None and len(context.chunk_spans) > 1:
            # the mask spans every position: a sliding window that drops some would misplace it
            if not keeps_every_position(request.lm.geometry, request.lm.geometry.max_positions):
                raise CagError(f"Scaled modes need a generator that keeps every position; {request.lm.name} "
                               "has sliding-window layers.")
            if context.pending is not None:
                raise CagError("A scaled mode cannot read a blended context.")
            context.log_scale = math.log(request.options.context_scale)
        return built
