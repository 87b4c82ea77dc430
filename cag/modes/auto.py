"""`--mode auto`: native when the generator's own caches hold every retrieved chunk; else what a mode
offers for the (store, generator) pair whose recorded quality clears the threshold (the MoT
translator, in full or blended, see mot/modes.py); else direct. It says which and why."""

from dataclasses import replace

from cag.modes.base import AutoOffer, ContextMode, ModeOptions
from cag.modes.registry import get_mode, modes


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
        native = get_mode("native")
        if native.missing(store, lm, rows) is None:
            return native, options, f"mode auto: using native ({lm.name}'s own stored caches)"
        if self.offer is not None:
            return (get_mode(self.offer.mode), replace(options, **self.offer.options),
                    f"mode auto: using {self.offer.mode} ({self.offer.why})")
        why = "; ".join(self.reasons) or "no translator modes are installed"
        return get_mode("direct"), options, f"mode auto: using direct (no native caches for {lm.name} in the store; {why})"
