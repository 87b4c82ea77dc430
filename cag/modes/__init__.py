"""Context modes: how a generator gets the context it answers from (see cag.modes.base).

cag's own: direct, none, native, native-blend. `mot` adds translated, single, ridge,
translated-window and translated-blend (entry point `cag.modes`). `docs/modes.md`'s table and
`cag ask --help` are generated from this registry (cag.modes.table).
"""

from cag.modes.auto import AutoChooser
from cag.modes.base import AutoOffer, BuiltContext, ContextMode, ContextRequest, ModeOptions, Reads
from cag.modes.blend import BlendMode
from cag.modes.native import NativeMode, assemble_cached, native_space
from cag.modes.registry import get_mode, mode_names, modes, register
from cag.modes.text import DirectMode, NoContextMode

REFERENCE = DirectMode.name  # what every other mode's quality is measured against

for _mode in (DirectMode(), NativeMode(), NoContextMode(), BlendMode("native-blend", "native")):
    register(_mode)

__all__ = ["REFERENCE", "AutoChooser", "AutoOffer", "BlendMode", "BuiltContext", "ContextMode", "ContextRequest",
           "ModeOptions", "Reads", "assemble_cached", "get_mode", "mode_names", "modes", "native_space", "register"]
