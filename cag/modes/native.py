"""`native`: the generator's own chunk caches, stored by `cag ingest --also-for MODEL`, placed at
their positions after its prefix (TurboRAG-like same-model CAG)."""

from cag.errors import CagError
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import ids_sha256
from cag.modes.base import BuiltContext, ContextMode, ContextRequest, Reads
from cag.prompt import prompt_layout
from cag.timing import Timings


def native_space(store, lm, layout):
    """The store's cache space of `lm`'s own caches after its prefix, or None."""
    return store.native_space(lm.fingerprint, ids_sha256(layout.prefix_ids))


def assemble_cached(request: ContextRequest, space) -> BuiltContext:
    """Read `request.rows`' caches from `space` and assemble them after the generator's prefix."""
    timings = Timings()
    with timings.measure("load"):
        caches = [request.store.read_cache(space, row) for row in request.rows]
    with timings.measure("assemble"):
        context = assemble(request.lm, caches, request.layout.prefix_ids)
    return BuiltContext(context, [], context.length - context.prefix_tokens, timings)


class NativeMode(ContextMode):
    name = "native"
    reads = Reads.NATIVE
    help = "the generator's own stored chunk caches (`cag ingest --also-for MODEL`)"
    stores = "the generator's own caches (12 KB per token for qwen2.5-coder-0.5b in fp16)"

    def missing(self, store, lm, rows: list) -> str | None:
        space = native_space(store, lm, prompt_layout(lm.tokenizer))
        absent = [r for r in rows if space is None or not store.cache_path(space, r.text_sha256).is_file()]
        if not absent:
            return None
        docs = " ".join(sorted({r.doc_path for r in absent}))  # every one: the command is run as printed
        return (f"No native caches for {lm.name} in store {store.folder} for {len(absent)} of the {len(rows)} "
                f"retrieved chunks: run `cag ingest {docs} --also-for {lm.name} --store {store.folder}`, "
                "or use --mode direct.")

    def build(self, request: ContextRequest) -> BuiltContext:
        space = native_space(request.store, request.lm, request.layout)
        if space is None:
            raise CagError(self.missing(request.store, request.lm, request.rows))
        return assemble_cached(request, space)
