"""What a context mode is: given the retrieved chunk rows, build the context a generator answers
from (an assembled cache, and/or token ids it prefills before the question).

A mode is a small class; `cag.modes.registry` holds one instance per name. Modes that need other
packages (translators: `mot/`) register themselves through the `cag.modes` entry point.
"""

import enum
from dataclasses import dataclass, field

from cag.defaults import DEFAULT_BLEND, DEFAULT_BLEND_SELECT
from cag.timing import Timings


class Reads(enum.Enum):
    """What a mode's context is made from."""

    TEXT = "text"  # the retrieved chunks' text, prefilled by the generator
    NOTHING = "nothing"  # no context at all
    NATIVE = "native"  # the generator's own stored chunk caches
    ENCODER = "encoder"  # the store's encoder caches (translated)


@dataclass(frozen=True)
class ModeOptions:
    """Settings some modes read; the others ignore them."""

    blend: float = DEFAULT_BLEND  # blend modes: share of context tokens the generator recomputes
    blend_select: str = DEFAULT_BLEND_SELECT  # blend modes: which tokens (cag.kv.blend selections)
    window: tuple | None = None  # window modes: [start, end) generator layers (default: the translator's)
    keep_translated: bool = True  # translated modes: store chunk translations for reuse


@dataclass(frozen=True)
class ContextRequest:
    """Everything a mode may read to build one context."""

    store: object  # cag.store.Store
    lm: object  # cag.models.LoadedModel
    layout: object  # cag.prompt.PromptLayout
    rows: list  # [ChunkRow] in assembly order (the best chunk last, next to the question)
    question_ids: list  # the question as the generator reads it after the context
    options: ModeOptions = ModeOptions()


@dataclass
class BuiltContext:
    context: object | None  # cag.kv.assemble.AssembledContext, or None (nothing cached)
    lead_ids: list  # token ids the generator prefills before the question (direct: the chunks' text)
    context_tokens: int
    timings: Timings = field(default_factory=Timings)  # ms per step of the build (load, translate, ...)
    notes: list = field(default_factory=list)  # what the user should know about this context (one line each)


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
    reads: Reads = Reads.TEXT
    translator_kind: object | None = None  # the mot.kinds.TranslatorKind it needs, if any
    recomputes: bool = False  # recomputes a share of the context (reads ModeOptions.blend)
    uses_window: bool = False  # reads ModeOptions.window
    help: str = ""  # what it is, in a line (`cag ask --help`, docs/modes.md: cag.modes.table)
    computes: str = "the question"  # what the generator computes per question, in words
    stores: str = "nothing"  # what it needs stored per context token, in words

    @property
    def needs_retrieval(self) -> bool:
        return self.reads is not Reads.NOTHING

    def prepare(self, store, lm) -> None:
        """One-time work before questions are timed (e.g. loading a translator)."""

    def missing(self, store, lm, rows: list) -> str | None:
        """Why this mode cannot answer from `rows` in `store` (None: it can)."""
        return None

    def offer_for_auto(self, store, lm, min_retention: float) -> AutoOffer | None:
        """What `--mode auto` may use of this mode (None: it never offers itself)."""
        return None

    def build(self, request: ContextRequest) -> BuiltContext:
        raise NotImplementedError
