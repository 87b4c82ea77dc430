"""`--mode auto`: native when the generator's own caches hold every retrieved chunk; else what a mode
offers for the (store, generator) pair whose recorded quality clears the threshold (the MoT
translator, in full or blended, see mot/modes.py); else direct. It says which and why, and, when the
generator's own cache space lacks some retrieved chunks (a cache deleted, or a file ingested without
--also-for), which and the command that makes them."""

from dataclasses import replace

from cag.modes.base import AutoOffer, ContextMode, ModeOptions
from cag.modes.native import NativeMode, native_space
from cag.modes.registry import get_mode, modes
from cag.modes.text import DirectMode
from cag.prompt import prompt_layout


class AutoChooser:
    """Works out what the store offers `lm` once (`prepare`, before questions are timed), then
    picks a mode per question from its retrieved rows (`choose`)."""

    def __init__(self, min_retention: float):
        self.min_retention = min_retention
        self.offer: AutoOffer | None = None
        self.reasons: list[str] = []

    def prepare(self, store, lm) -> None:
        for mode in modes():
            offer = mode.offer_for_auto(store, lm, self.min_retention)
            if offer is None:
                continue
            if offer.mode is not None:
                self.offer = offer
                get_mode(offer.mode).prepare(store, lm)
                return
            self.reasons.append(offer.why)

    def choose(self, store, lm, rows: list, options: ModeOptions) -> tuple[ContextMode, ModeOptions, str]:
        """(mode, its options, a note saying why)."""
        native = get_mode(NativeMode.name)
        missing = native.missing(store, lm, rows)
        if missing is None:
            return native, options, f"mode auto: using {native.name} ({lm.name}'s own stored caches)"
        # the generator has a cache space here, so its caches were asked for: say which are missing
        # and how to make them, rather than fall back in silence
        has_space = native_space(store, lm, prompt_layout(lm.tokenizer)) is not None
        lacking, none_here = (f"; not native: {missing}", "") if has_space else \
            ("", f"no native caches for {lm.name} in the store; ")
        if self.offer is not None:
            return (get_mode(self.offer.mode), replace(options, **self.offer.options),
                    f"mode auto: using {self.offer.mode} ({self.offer.why}){lacking}")
        why = "; ".join(self.reasons) or "no translator modes are installed"
        return get_mode(DirectMode.name), options, f"mode auto: using direct ({none_here}{why}){lacking}"
