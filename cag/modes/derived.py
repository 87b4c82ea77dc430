"""A mode built on another registered mode (the blend modes): it reads what its base reads, needs
the base's translator, and prepares and checks what the base does."""

from cag.modes.base import ContextMode
from cag.modes.registry import get_mode


class DerivedMode(ContextMode):
    """`name`: a mode whose context starts as the `base` mode's."""

    def __init__(self, name: str, base: str):
        self.name, self.base_name = name, base

    @property
    def base(self) -> ContextMode:
        return get_mode(self.base_name)  # by name: the base may be registered after this mode

    @property
    def reads(self):
        return self.base.reads

    @property
    def translator_kind(self):
        return self.base.translator_kind

    @property
    def stores(self) -> str:
        return self.base.stores

    def prepare(self, store, lm) -> None:
        self.base.prepare(store, lm)

    def missing(self, store, lm, rows: list) -> str | None:
        return self.base.missing(store, lm, rows)
