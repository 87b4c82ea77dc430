"""`cag models`: every model alias, where it comes from, and whether it is available offline here."""

import typer
from rich.console import Console
from rich.table import Table

from cli._errors import handle_errors


@handle_errors
def models_command() -> None:
    """List model aliases with their source and offline availability.

    Any Hugging Face id (org/name), local model folder or .gguf file also works as --model.
    """
    from cag.models.aliases import ALIASES
    from cag.models.loading import availability

    table = Table(title="cag models")
    for column in ("alias", "kind", "source", "family", "available here"):
        table.add_column(column)
    for spec in ALIASES.values():
        source = spec.note if spec.kind == "packaged" else spec.source
        table.add_row(spec.name, spec.kind, source, spec.family, availability(spec))
    Console(width=140).print(table)
    typer.echo("Also accepted: any Hugging Face id (org/name), a local model folder, a .gguf file.")
