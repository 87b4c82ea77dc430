"""Option types shared by several commands."""

from pathlib import Path
from typing import Annotated

import typer

StoreOption = Annotated[Path | None, typer.Option(
    "--store", envvar="CAG_STORE", help="Store folder (default: $CAG_HOME/stores/default).")]
ModelOption = Annotated[str, typer.Option(
    "--model", "-m", envvar="CAG_MODEL",
    help="Generator: alias (see `cag models`), hub id, model folder or .gguf file.")]
