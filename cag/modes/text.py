"""Modes where the generator reads text: `direct` (the retrieved chunks' text in the prompt, the
quality reference) and `none` (the question alone, the floor). Both start from the generator's own
cached prefix, as every mode does."""

import time

from cag.kv.assemble import assemble, check_positions
from cag.modes.base import BuiltContext, ContextMode, ContextRequest


class DirectMode(ContextMode):
    name = "direct"
    reads = "text"
    help = "the retrieved text in the prompt, prefilled by the generator (the quality reference)"

    def texts(self, request: ContextRequest) -> list[str]:
        return [row.text for row in request.rows]

    def build(self, request: ContextRequest) -> BuiltContext:
        lm, prefix = request.lm, list(request.layout.prefix_ids)
        ids = [t for text in self.texts(request)
               for t in lm.tokenizer(text, add_special_tokens=False)["input_ids"]]
        check_positions(lm.geometry, len(prefix) + len(ids))
        start = time.perf_counter()
        context = assemble(lm, [], prefix) if prefix else None  # the same cached prefix as native
        request.timings["assemble"] = (time.perf_counter() - start) * 1e3
        return BuiltContext(context, ids, len(ids))


class NoContextMode(DirectMode):
    name = "none"
    reads = "nothing"
    help = "the question alone (the floor)"

    def texts(self, request: ContextRequest) -> list[str]:
        return []
