"""Context modes: how a generator gets the context it answers from (see cag.modes.base).

cag's own: direct, none, native, native-blend, native-scaled, and their reader-adapter forms native+reader,
native-blend+reader, native+links (cag.modes.reader). `mot` adds translated, single, ridge, translated-window,
translated-blend, translated-scaled, translated+reader, translated-blend+reader and translated+links (entry point
`cag.modes`).
"""

from cag.modes.auto import AutoChooser
from cag.modes.base import AutoOffer, BuiltContext, ContextMode, ContextRequest, ModeOptions
from cag.modes.blend import BlendMode
from cag.modes.native import NativeMode, assemble_cached, native_space
from cag.modes.reader import LINKS_SUFFIX, SUFFIX as READER_SUFFIX, ReaderMode, native_choice
from cag.modes.registry import get_mode, mode_names, modes, register
from cag.modes.scaled import ScaledMode
from cag.modes.text import DirectMode, NoContextMode

for _mode in (DirectMode(), NativeMode(), NoContextMode(), BlendMode("native-blend", "native"),
              ScaledMode("native-scaled", "native"),
              ReaderMode("native" + READER_SUFFIX, "native"), ReaderMode("native-blend" + READER_SUFFIX, "native-blend"),
              ReaderMode("native" + LINKS_SUFFIX, "native", "links")):
    register(_mode)

__all__ = ["LINKS_SUFFIX", "READER_SUFFIX", "AutoChooser", "AutoOffer", "BlendMode", "BuiltContext", "ContextMode", "ContextRequest",
           "ModeOptions", "ReaderMode", "ScaledMode", "assemble_cached", "get_mode", "mode_names", "modes", "native_choice",
           "native_space", "register"]
