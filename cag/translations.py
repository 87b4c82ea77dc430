"""What names a translation of chunk caches from one model's space into another's: the translator
kind, and `TranslationId` (source, generator, kind) with its one string form. cag's store names
its translated cache spaces by it; mot's translators, their files and messages use it too."""

import enum
import re
from dataclasses import dataclass, fields
from pathlib import Path


class TranslatorKind(enum.StrEnum):
    MOT = "mot"  # experts + router per target layer (mot/mixture.py)
    SINGLE = "single"  # one expert per layer, no router (the single projection path)
    RIDGE = "ridge"  # the closed-form linear trunk alone, no training


_FORM = re.compile(r"^(?P<source>.+) -> (?P<generator>.+) \((?P<kind>[a-z]+)\)$")


def _file_part(name: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in Path(name).name)


@dataclass(frozen=True, slots=True)
class TranslationId:
    """A translation of `source`'s caches into `generator`'s space by a `kind` translator (model
    names as the user gives them: aliases, hub ids, folders)."""

    source: str
    generator: str
    kind: TranslatorKind

    def __post_init__(self):
        object.__setattr__(self, "kind", TranslatorKind(self.kind))  # a kind's string is accepted

    def __str__(self) -> str:
        return f"{self.source} -> {self.generator} ({self.kind})"

    @classmethod
    def from_string(cls, text: str) -> "TranslationId":
        """The inverse of str(): "SOURCE -> GENERATOR (KIND)"."""
        found = _FORM.match(text)
        if found is None:
            raise ValueError(f"not a translation id: {text!r} (SOURCE -> GENERATOR (KIND))")
        return cls(found["source"], found["generator"], TranslatorKind(found["kind"]))

    @property
    def file_stem(self) -> str:
        """The translator's file name without suffix: SOURCE__GENERATOR__KIND (path parts made safe)."""
        return f"{_file_part(self.source)}__{_file_part(self.generator)}__{self.kind}"

    def mismatched_fields(self, other: "TranslationId") -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]
