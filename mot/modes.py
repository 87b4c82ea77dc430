"""The context modes that read translators, registered with cag's modes (entry point `cag.modes`
in pyproject.toml, so cag never imports mot):

    translated         the encoder's caches translated by the MoT translator, every layer
    single, ridge      the same with the simpler translators (one expert per layer; closed form)
    translated-window  the MoT translator's K/V in a window of layers, the generator replaying the
                       context for the others (the paper's replay; a prefill's cost)
    translated-blend   translated, with a share of the tokens recomputed by the generator

`translated` also offers itself to `--mode auto`: in full when the MoT translator's recorded QA
retention clears the threshold, else blended at the setting recorded beside it if that one does.
"""

import time

from cag.kv.assemble import assemble
from cag.kv.blend import SELECTIONS
from cag.modes import AutoOffer, BlendMode, BuiltContext, ContextMode, ContextRequest, register
from mot.contexts import translated_chunks, translator_for, window_context
from mot.registry import find_translator


class TranslatedMode(ContextMode):
    """The encoder's caches translated into the generator's space by a `kind` translator."""

    reads = "encoder"

    def __init__(self, name: str, kind: str, help: str):
        self.name, self.translator_kind, self.help = name, kind, help

    def prepare(self, store, lm) -> None:
        translator_for(store, lm, self.translator_kind, self.name)

    def build(self, request: ContextRequest) -> BuiltContext:
        caches = translated_chunks(request.store, request.lm, request.layout, request.rows,
                                   self.translator_kind, request.timings, request.options.keep_translated)
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
                                 request.options.window, request.options.keep_translated)
        return BuiltContext(context, [], context.length - context.prefix_tokens)

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        return None


def gate(store, lm, min_retention: float) -> AutoOffer:
    """The fastest use of the MoT translator whose recorded QA retention clears `min_retention`:
    full translation (`metrics.qa`), else the translated-blend setting recorded beside it
    (`metrics.qa_blend`, which recomputes a share of the tokens), else none."""
    found = find_translator(store.config.encoder_fingerprint, lm.fingerprint, "mot",
                            store.config.encoder, lm.name)
    if found.path is None:
        return AutoOffer(None, found.reason)
    metrics = found.record["spec"].get("metrics", {})
    name = found.path.name
    retention = metrics.get("qa", {}).get("retention")
    if retention is None:
        return AutoOffer(None, f"translator {name} has no recorded QA retention")
    if retention >= min_retention:
        return AutoOffer("translated", f"translator {name} keeps {retention:.2f} of direct QA quality")
    why = f"translator {name} keeps {retention:.2f} of direct QA quality, below the {min_retention:.2f} threshold"
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
    for mode in (TranslatedMode("translated", "mot", "the encoder's caches translated by the MoT translator"),
                 TranslatedMode("single", "single", "the same with the single-path translator (one expert per layer)"),
                 TranslatedMode("ridge", "ridge", "the same with the closed-form ridge translator"),
                 WindowMode("translated-window", "mot", "the MoT translator's K/V in a window of layers, "
                            "the generator replaying the context for the others (a prefill's cost)"),
                 BlendMode("translated-blend", "translated")):
        register(mode)
