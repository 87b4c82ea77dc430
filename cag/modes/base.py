"""What a context mode is: given the retrieved chunk rows, build the context a generator answers
from (an assembled cache, and/or token ids it prefills before the question).

A mode is a small class; `cag.modes.registry` holds one instance per name. Modes that need other
packages (translators: `mot/`) register themselves through the `cag.modes` entry point.
"""

from dataclasses import dataclass, field

from cag.defaults import DEFAULT_BLEND, DEFAULT_BLEND_SELECT, DEFAULT_CONTEXT_SCALE


@dataclass(frozen=True)
class ModeOptions:
    """Settings some modes read; the others ignore them."""

    blend: float = DEFAULT_BLEND  # blend modes: share of context tokens the generator recomputes
    blend_select: str = DEFAULT_BLEND_SELECT  # blend modes: which tokens (cag.kv.blend selections)
    window: tuple | None = None  # window modes: [start, end) generator layers (default: the translator's)
    keep_translated: bool = True  # translated modes: store chunk translations for reuse
    context_scale: float = DEFAULT_CONTEXT_SCALE  # scaled modes: factor on the context's share of attention


@dataclass
class ContextRequest:
    """Everything a mode may read to build one context."""

    store: object  # cag.store.Store
    lm: object  # cag.models.LoadedModel
    layout: object  # cag.prompt.PromptLayout
    rows: list  # [ChunkRow] in assembly order (the best chunk last, next to the question)
    question_ids: list  # the question as the generator reads it after the context
    options: ModeOptions = ModeOptions()
    timings: dict = field(default_factory=lambda: {"load": 0.0, "translate": 0.0, "assemble": 0.0})
    notes: list = field(default_factory=list)  # what the user should know about this context (one line each)


@dataclass
class BuiltContext:
    context: object | None  # cag.kv.assemble.AssembledContext, or None (nothing cached)
    lead_ids: list  # token ids the generator prefills before the question (direct: the chunks' text)
    context_tokens: int
    reader: str | None = None  # the reader adapter (cag.readers) switched on for the question and answer


@dataclass(frozen=True)
class AutoOffer:
    """What a mode offers `--mode auto` for a (store, generator): `mode` to use with `options`
    (None: nothing usable), and why, in words."""

    mode: str | None
    why: str
    options: dict = field(default_factory=dict)  # ModeOptions fields to override (a recorded blend)


class ContextMode:
    """One way of giving the generator its context. Subclasses set the class attributes and
    implement `build`."""

    name: str = ""
    reads: str = "text"  # "text", "nothing", "native" (the generator's caches) or "encoder" (the store's)
    translator_kind: str | None = None  # the translator kind it needs (mot/registry), if any
    recomputes: bool = False  # recomputes a share of the context (reads ModeOptions.blend)
    uses_window: bool = False  # reads ModeOptions.window
    scales: bool = False  # scales the context's share of attention (reads ModeOptions.context_scale)
    help: str = ""

    @property
    def needs_retrieval(self) -> bool:
        return self.reads != "nothing"

    def prepare(self, store, lm) -> None:
        """One-time work before questions are timed (e.g. loading a translator)."""

    def missing(self, store, lm, rows: list) -> str | None:
        """Why this mode cannot answer from `rows` in `store` (None: it can)."""
        return None

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        """What `--mode auto` may use of this mode (None: it never offers itself)."""
        return None

    def reader_identity(self, store, lm) -> tuple[str, str] | None:
        """What the generator reads in this mode, as a reader adapter is keyed (cag.readers): ("native",
        "native") for its own chunk caches, (translator fingerprint, "SOURCE -> GENERATOR (KIND)") for
        a translator's; None where no stored context is read (no reader applies)."""
        return None

    def build(self, request: ContextRequest) -> BuiltContext:
        raise NotImplementedError
