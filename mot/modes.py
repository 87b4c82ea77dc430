"""The context modes that read translators, registered with cag's modes (entry point `cag.modes`
in pyproject.toml, so cag never imports mot):

    translated         the encoder's caches translated by the MoT translator, every layer
    single, ridge      the same with the simpler translators (one expert per layer; closed form)
    translated-window  the MoT translator's K/V in a window of layers, the generator replaying the
                       context for the others (the paper's replay; a prefill's cost)
    translated-blend   translated, with a share of the tokens recomputed by the generator

`translated` also offers itself to `--mode auto`: the fastest of full translation and the recorded
blend setting whose recorded QA retention clears the threshold.
"""

from cag.kv.assemble import assemble
from cag.kv.blend import SELECTIONS
from cag.modes import AutoOffer, BlendMode, BuiltContext, ContextMode, ContextRequest, Reads, register
from cag.translations import TranslationId, TranslatorKind
from mot.contexts import translated_chunks, translator_for, window_context
from mot.registry import find_translator


class TranslatedMode(ContextMode):
    """The encoder's caches translated into the generator's space by a `kind` translator."""

    reads = Reads.ENCODER
    computes = "the question (and translates the chunks not yet translated, once)"
    stores = "nothing beyond the encoder's caches (translations are kept for reuse)"

    def __init__(self, name: str, kind: TranslatorKind, help: str):
        self.name, self.translator_kind, self.help = name, kind, help

    def prepare(self, store, lm) -> None:
        translator_for(store, lm, self.translator_kind, self.name)

    def build(self, request: ContextRequest) -> BuiltContext:
        translated = translated_chunks(request.store, request.lm, request.layout, request.rows,
                                       self.translator_kind, request.options.keep_translated)
        with translated.timings.measure("assemble"):
            context = assemble(request.lm, translated.chunks, request.layout.prefix_ids)
        return BuiltContext(context, [], context.length - context.prefix_tokens, translated.timings, translated.notes)

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        return gate(store, lm, min_retention) if self.translator_kind is TranslatorKind.MOT else None


class WindowMode(TranslatedMode):
    uses_window = True
    computes = "the context in the layers outside the window (a prefill's cost) and the question"

    def build(self, request: ContextRequest) -> BuiltContext:
        context, translated = window_context(request.store, request.lm, request.layout, request.rows,
                                             request.options.window, request.options.keep_translated)
        return BuiltContext(context, [], context.length - context.prefix_tokens, translated.timings, translated.notes)

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        return None


def gate(store, lm, min_retention: float) -> AutoOffer:
    """The fastest use of the MoT translator whose recorded QA retention clears `min_retention`:
    full translation (the translator's `metrics.qa`), else its recorded translated-blend setting
    (`metrics.qa_blend`, which recomputes a share of the tokens), else none."""
    wanted = TranslationId(store.config.encoder, lm.name, TranslatorKind.MOT)
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, wanted)
    if found.path is None:
        return AutoOffer(None, found.reason)
    what = f"translator {found.path.name}"
    metrics = found.record["spec"].get("metrics", {})
    retention = metrics.get("qa", {}).get("retention")
    if retention is None:
        return AutoOffer(None, f"{what} has no recorded QA retention")
    if retention >= min_retention:
        return AutoOffer("translated", f"{what} keeps {retention:.2f} of direct QA quality")
    why = f"{what} keeps {retention:.2f} of direct QA quality, below the {min_retention:.2f} threshold"
    blend = metrics.get("qa_blend", {})
    if blend.get("retention") is None:
        return AutoOffer(None, why)
    setting = f"translated-blend {blend['blend']} ({blend['blend_select']})"
    if blend["blend_select"] not in SELECTIONS:
        return AutoOffer(None, f"{why}; {setting} uses a selection this cag does not offer")
    if blend["retention"] < min_retention:
        return AutoOffer(None, f"{why}; {setting} keeps {blend['retention']:.2f}")
    return AutoOffer("translated-blend", f"{why}; {setting} keeps {blend['retention']:.2f}",
                     {"blend": blend["blend"], "blend_select": blend["blend_select"]})


def register_modes() -> None:
    """The `cag.modes` entry point."""
    for mode in (TranslatedMode("translated", TranslatorKind.MOT, "the encoder's caches translated by the MoT translator"),
                 TranslatedMode("single", TranslatorKind.SINGLE,
                                "translated, by the single-path translator (one expert per layer, no router)"),
                 TranslatedMode("ridge", TranslatorKind.RIDGE, "translated, by the closed-form ridge translator (no training)"),
                 WindowMode("translated-window", TranslatorKind.MOT, "the MoT translator's K/V in a window of layers, "
                            "the generator replaying the context in the others (the paper's method)"),
                 BlendMode("translated-blend", "translated")):
        register(mode)
