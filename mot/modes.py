"""The context modes that read translators, registered with cag's modes (entry point `cag.modes`
in pyproject.toml, so cag never imports mot):

    translated         the encoder's caches translated by the MoT translator, every layer
    single, ridge      the same with the simpler translators (one expert per layer; closed form)
    translated-window  the MoT translator's K/V in a window of layers, the generator replaying the
                       context for the others (the paper's replay; a prefill's cost)
    translated-blend   translated, with a share of the tokens recomputed by the generator
    translated-scaled  translated, with the context's share of attention scaled (cag.modes.scaled)
    translated+reader, translated-blend+reader
                       the same contexts, read through the reader adapter trained for the MoT
                       translator's caches (cag.readers; on the question and answer only)
    translated+links   translated, with the learned link tokens trained for that translator's caches

`translated` also offers itself to `--mode auto`: the fastest of full translation and the recorded
blend setting, with or without the reader adapter, whose recorded QA retention clears the threshold.
"""

import time

from cag.kv.assemble import assemble
from cag.kv.blend import SELECTIONS
from cag.modes import LINKS_SUFFIX, READER_SUFFIX, AutoOffer, BlendMode, BuiltContext, ContextMode, ContextRequest, ReaderMode, ScaledMode, register
from cag.readers import find_reader
from mot.contexts import translated_chunks, translator_for, window_context
from mot.registry import find_translator


class TranslatedMode(ContextMode):
    """The encoder's caches translated into the generator's space by a `kind` translator."""

    reads = "encoder"

    def __init__(self, name: str, kind: str, help: str):
        self.name, self.translator_kind, self.help = name, kind, help

    def prepare(self, store, lm) -> None:
        translator_for(store, lm, self.translator_kind, self.name)

    def reader_identity(self, store, lm):
        translator = translator_for(store, lm, self.translator_kind, self.name)
        return translator.fingerprint(), reads_name(translator.spec.source.name, lm.name, self.translator_kind)

    def build(self, request: ContextRequest) -> BuiltContext:
        caches = translated_chunks(request.store, request.lm, request.layout, request.rows,
                                   self.translator_kind, request.timings, request.options.keep_translated,
                                   request.notes)
        start = time.perf_counter()
        context = assemble(request.lm, caches, request.layout.prefix_ids)
        request.timings["assemble"] = (time.perf_counter() - start) * 1e3
        return BuiltContext(context, [], context.length - context.prefix_tokens)

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        return gate(store, lm, min_retention) if self.translator_kind == "mot" else None


class WindowMode(TranslatedMode):
    uses_window = True

    def build(self, request: ContextRequest) -> BuiltContext:
        context = window_context(request.store, request.lm, request.layout, request.rows, request.timings,
                                 request.options.window, request.options.keep_translated, request.notes)
        return BuiltContext(context, [], context.length - context.prefix_tokens)

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        return None


def reads_name(source: str, generator: str, kind: str) -> str:
    """How a translator's caches are named to a reader adapter (cag.readers): "SOURCE -> GENERATOR (KIND)"."""
    return f"{source} -> {generator} ({kind})"


def gate(store, lm, min_retention: float) -> AutoOffer:
    """The fastest use of the MoT translator whose recorded QA retention clears `min_retention`:
    full translation (the translator's `metrics.qa`, or its reader adapter's), else a recorded
    translated-blend setting (`metrics.qa_blend` of either, which recomputes a share of the
    tokens; the smaller share first), else none. Between equally fast ones, the higher retention."""
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, "mot",
                            store.config.encoder, lm.name)
    if found.path is None:
        return AutoOffer(None, found.reason)
    offers = [_offer(found.record["spec"].get("metrics", {}), "", f"translator {found.path.name}", min_retention)]
    reader = find_reader(found.record.get("fingerprint", ""), lm.fingerprint,
                         reads_name(store.config.encoder, lm.name, "mot"), lm.name)
    if reader.path is not None:
        offers.append(_offer(reader.record["spec"].get("metrics", {}), READER_SUFFIX,
                             f"reader adapter {reader.path.name}", min_retention))
    usable = [o for o in offers if o[0].mode is not None]
    if not usable:
        return AutoOffer(None, "; ".join(o[0].why for o in offers))
    return min(usable, key=lambda o: o[1])[0]


def _offer(metrics: dict, suffix: str, what: str, min_retention: float) -> tuple[AutoOffer, tuple]:
    """(offer, sort key: cost then -retention) from one record's `qa` / `qa_blend`."""
    retention = metrics.get("qa", {}).get("retention")
    if retention is None:
        return AutoOffer(None, f"{what} has no recorded QA retention"), ()
    if retention >= min_retention:
        return AutoOffer("translated" + suffix, f"{what} keeps {retention:.2f} of direct QA quality"), (0.0, -retention)
    why = f"{what} keeps {retention:.2f} of direct QA quality, below the {min_retention:.2f} threshold"
    blend = metrics.get("qa_blend", {})
    if blend.get("retention") is None:
        return AutoOffer(None, why), ()
    setting = f"translated-blend{suffix} {blend['blend']} ({blend['blend_select']})"
    if blend["blend_select"] not in SELECTIONS:
        return AutoOffer(None, f"{why}; {setting} uses a selection this cag does not offer"), ()
    if blend["retention"] < min_retention:
        return AutoOffer(None, f"{why}; {setting} keeps {blend['retention']:.2f}"), ()
    return (AutoOffer("translated-blend" + suffix, f"{why}; {setting} keeps {blend['retention']:.2f}",
                      {"blend": blend["blend"], "blend_select": blend["blend_select"]}),
            (float(blend["blend"]), -blend["retention"]))


def register_modes() -> None:
    """The `cag.modes` entry point."""
    for mode in (TranslatedMode("translated", "mot", "the encoder's caches translated by the MoT translator"),
                 TranslatedMode("single", "single", "the same with the single-path translator (one expert per layer)"),
                 TranslatedMode("ridge", "ridge", "the same with the closed-form ridge translator"),
                 WindowMode("translated-window", "mot", "the MoT translator's K/V in a window of layers, "
                            "the generator replaying the context for the others (a prefill's cost)"),
                 BlendMode("translated-blend", "translated"),
                 ScaledMode("translated-scaled", "translated"),
                 ReaderMode("translated" + READER_SUFFIX, "translated"),
                 ReaderMode("translated-blend" + READER_SUFFIX, "translated-blend"),
                 ReaderMode("translated" + LINKS_SUFFIX, "translated", "links")):
        register(mode)
