"""A command's options made from a frozen config's fields (cag.settings.setting): the default, the
help and the spelling come from the config, so no command re-declares them.

    @handle_errors
    @with_config(IngestOptions, ("encoder", "chunk_tokens", ...))
    def ingest_command(paths: ..., store: ..., config: IngestOptions) -> None: ...

The command's own parameters come first; `config` is made from the generated options' values."""

import dataclasses
import functools
import inspect
from typing import Annotated

import typer


def option_flag(field: dataclasses.Field) -> str:
    """How the command line spells a config field's option (--x/--no-x for a bool)."""
    meta = field.metadata
    flag = meta.get("flag") or "--" + field.name.replace("_", "-")
    if (meta.get("cli_type") or field.type) is bool and "/" not in flag:
        flag = f"{flag}/--no-{flag[2:]}"  # as typer spells a bool option it names itself
    return flag


def option_parameter(field: dataclasses.Field, unset_means: str | None = None) -> inspect.Parameter:
    """The option of a config field; `unset_means` (words with {default}): the option may be left out
    (default None), and this says what that means."""
    meta = field.metadata
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        default = ...  # a required option
    if meta.get("show") and default is not ...:
        default = meta["show"](default)
    kind = meta.get("cli_type") or field.type
    names = [option_flag(field)] + ([meta["short"]] if meta.get("short") else [])
    text = meta.get("help")
    text = (text() if callable(text) else text) or ""
    if unset_means is not None:
        text, default = f"{text} Default: {unset_means.format(default=default)}.", None
        kind = kind | None
    option = typer.Option(*names, help=text or None, envvar=meta.get("envvar"),
                          min=meta.get("min"), max=meta.get("max"))
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, option])


def with_config(config_cls, names: tuple, param: str = "config", optional: tuple = (),
                unset_means: str = ""):
    """Decorate a command: options for `names` (fields of `config_cls`, in that order) after its own
    parameters; it is called with `param` = config_cls(those values, parsed). The `optional` ones
    may be left out (their help ends with `unset_means`): config_cls's defaults stand in for them,
    and the command, if it has an `unset` parameter, gets the set of those left out."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    unknown = [n for n in names if n not in fields]
    if unknown:
        raise TypeError(f"{config_cls.__name__} has no field(s) {unknown}")

    def decorate(command):
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for p in inspect.signature(command).parameters.values() if p.name != param]
        generated = [option_parameter(fields[n], unset_means if n in optional else None) for n in names]
        passes_unset = "unset" in inspect.signature(command).parameters
        own = [p for p in own if p.name != "unset"]

        @functools.wraps(command)
        def wrapper(**kwargs):
            values, unset = {}, set()
            for name in names:
                parse = fields[name].metadata.get("parse")
                value = kwargs.pop(name)
                if name in optional and value is None:
                    unset.add(name)
                    continue
                values[name] = parse(value) if parse else value
            extra = {"unset": frozenset(unset)} if passes_unset else {}
            return command(**kwargs, **extra, **{param: config_cls(**values)})

        parameters = own + generated
        wrapper.__signature__ = inspect.Signature(parameters)
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        del wrapper.__wrapped__  # typer reads the signature above, not the command's
        return wrapper

    return decorate
