"""`cag ask`: answer a question from the stored chunk caches."""

import json
import sys
from typing import Annotated

import typer

from cag.ask import AskOptions
from cli._errors import handle_errors
from cli.config_options import with_config
from cli.options import StoreOption
from cli.text import printable


@handle_errors
@with_config(AskOptions, ("model", "top_k", "mode", "blend", "min_retention", "max_new_tokens", "device", "dtype"))
def ask_command(
    question: Annotated[str, typer.Argument(help="The question.")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object, no streaming.")] = False,
    show_sources: Annotated[bool, typer.Option(help="List the retrieved chunks after the answer.")] = False,
    config: AskOptions = None,
) -> None:
    """Retrieve chunks for QUESTION, bring their stored caches into the generator's space, and
    answer without the generator re-reading the text.

    TTFT counts from the question to the first token; one-time costs (loading the models, the
    first forward pass) are reported apart as warm-up.
    """
    from cag.ask import ask, check_question

    check_question(question)
    stream = None if as_json else _stream
    result = ask(question, store, config, on_token=stream)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    sys.stdout.write("\n")
    sys.stdout.flush()  # the answer line ends before the summary goes to stderr
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    t = result.timings_ms
    typer.echo(f"[{result.mode} | {result.model} | {result.context_tokens} context tokens | "
               f"TTFT {t['ttft']:.0f} ms | total {t['total']:.0f} ms | warm-up {t['warmup']:.0f} ms]", err=True)
    if show_sources:
        for s in result.sources:
            typer.echo(f"  {s.score:.3f}  {printable(s.doc)}  chunk {s.chunk}")


def _stream(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()
