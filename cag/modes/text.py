"""Modes where the generator reads text: `direct` (the retrieved chunks' text in the prompt, the
quality reference) and `none` (the question alone, the floor). Both start from the generator's own
cached prefix, as every mode does."""

from cag.kv.assemble import assemble, check_positions
from cag.modes.base import BuiltContext, ContextMode, ContextRequest, Reads
from cag.timing import Timings


class DirectMode(ContextMode):
    name = "direct"
    reads = Reads.TEXT
    help = "the retrieved text in the prompt, prefilled by the generator (the quality reference)"
    computes = "the whole context and the question"

    def texts(self, request: ContextRequest) -> list[str]:
        return [row.text for row in request.rows]

    def build(self, request: ContextRequest) -> BuiltContext:
        lm, prefix = request.lm, list(request.layout.prefix_ids)
        ids = [t for text in self.texts(request)
               for t in lm.tokenizer(text, add_special_tokens=False)["input_ids"]]
        check_positions(lm.geometry, len(prefix) + len(ids))
        timings = Timings()
        with timings.measure("assemble"):
            context = assemble(lm, [], prefix) if prefix else None  # the same cached prefix as native
        return BuiltContext(context, ids, len(ids), timings)


class NoContextMode(DirectMode):
    """`direct` with no text: the question alone."""

    name, reads, computes = "none", Reads.NOTHING, "the question"
    help = "the question alone (the floor)"

    def texts(self, request: ContextRequest) -> list[str]:
        return []
