"""Settings declared once. A frozen config's field carries its default, its help and how the
command line spells it; `cli/config_options.py` builds each command's options from these fields
(vLLM's `get_kwargs` habit), so a default or a help text lives in one place. Configs check
themselves in `__post_init__`, on every construction path."""

from collections.abc import Callable
from dataclasses import MISSING, field

from cag.errors import CagError


def setting(default=MISSING, help: str = "", *, default_factory=MISSING, flag: str | None = None,
            short: str | None = None, envvar: str | None = None, minimum=None, maximum=None,
            cli_type=None, parse: Callable | None = None, show: Callable | None = None):
    """A config field with its command-line option: `flag` (default --FIELD-NAME), `short`, `envvar`,
    `minimum`/`maximum` (checked by the parser), `cli_type` (the type the option takes, when the
    field holds another: a tuple from a comma-separated string), `parse` (option value -> field
    value) and `show` (field default -> option default)."""
    metadata = {"help": help, "flag": flag, "short": short, "envvar": envvar, "min": minimum,
                "max": maximum, "cli_type": cli_type, "parse": parse, "show": show}
    return field(default=default, default_factory=default_factory, metadata=metadata)


def comma_list(text: str | None) -> tuple:
    """"a, b,c" -> ("a", "b", "c") (empty items dropped); a tuple or list passes through."""
    if text is None:
        return ()
    if isinstance(text, (tuple, list)):
        return tuple(text)
    return tuple(item.strip() for item in text.split(",") if item.strip())


def layer_span(text) -> tuple | None:
    """"START:END" -> (START, END) (generator layers); None -> None; a pair passes through."""
    if text is None or isinstance(text, (tuple, list)):
        return tuple(text) if text is not None else None
    try:
        start, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise CagError(f"--window must look like START:END (generator layers), not {text!r}.") from None
    return start, end



def check_at_least(name: str, value: int, least: int = 1) -> None:
    if value < least:
        raise CagError(f"--{name} must be at least {least} (got {value}).")
