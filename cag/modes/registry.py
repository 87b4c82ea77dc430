"""The context modes by name. cag registers its own (direct, none, native, native-blend); other
packages add theirs through the `cag.modes` entry point (a callable run once, on first lookup),
so cag never imports them: `mot` registers translated, single, ridge, translated-window and
translated-blend that way (see pyproject.toml). `auto` is no mode but a choice among them
(cag.modes.auto)."""

import logging
from importlib.metadata import entry_points

from cag.errors import CagError
from cag.modes.base import ContextMode

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "cag.modes"
AUTO = "auto"  # not a registered mode: cag.modes.auto picks one per question
_MODES: dict[str, ContextMode] = {}
_plugins_loaded = False


def register(mode: ContextMode) -> ContextMode:
    """Add `mode` under its name (registering the same name again replaces it)."""
    if not mode.name:
        raise ValueError(f"{type(mode).__name__} has no name")
    _MODES[mode.name] = mode
    return mode


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()()
        except Exception as exc:  # a broken plugin must not take the built-in modes down with it
            log.warning("context modes from %s (%s) not loaded: %s", entry.name, entry.value, exc)


def get_mode(name: str) -> ContextMode:
    _load_plugins()
    if name not in _MODES:
        raise CagError(f"Unknown mode {name!r}; choose one of {', '.join(mode_names(auto=True))}.")
    return _MODES[name]


def mode_names(auto: bool = False) -> list[str]:
    """Every registered mode, in registration order (with "auto" first when asked)."""
    _load_plugins()
    return ([AUTO] if auto else []) + list(_MODES)


def modes() -> list[ContextMode]:
    _load_plugins()
    return list(_MODES.values())
