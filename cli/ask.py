"""`cag ask`: answer a question from the stored chunk caches."""

import json
import sys
from typing import Annotated

import typer

from cag.defaults import DEFAULT_BLEND, DEFAULT_GENERATOR, DEFAULT_MIN_RETENTION
from cli._errors import handle_errors
from cli.options import DeviceOption, DtypeOption, ModelOption, StoreOption
from cli.text import printable


@handle_errors
def ask_command(
    question: Annotated[str, typer.Argument(help="The question.")],
    store: StoreOption = None,
    model: ModelOption = DEFAULT_GENERATOR,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Chunks to retrieve.")] = 3,
    mode: Annotated[str, typer.Option(
        help="auto | direct | native | translated | translated-blend | native-blend | translated-window | "
             "single | ridge | none. direct: the retrieved text in the prompt (the quality reference); "
             "native: the generator's own stored caches (`cag ingest --also-for`); translated: the "
             "encoder's caches translated by the MoT translator (`cag train`); the -blend modes let "
             "the generator recompute a share (--blend) of the context tokens, those the question "
             "attends to most; translated-window injects the translation into a window of layers and "
             "replays the rest (a prefill's cost); single and ridge: simpler translators; none: the "
             "question alone; auto: native if stored, else a translation whose recorded quality "
             "clears --min-retention, else direct (docs/modes.md).")] = "auto",
    blend: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of context tokens the -blend modes "
                                         "recompute.")] = DEFAULT_BLEND,
    min_retention: Annotated[float, typer.Option(
        help="Quality gate for --mode auto: use a translator only if its recorded QA retention "
             "(score / direct score) is at least this; below it, the translated-blend setting "
             "recorded beside it if that clears it, else direct.")] = DEFAULT_MIN_RETENTION,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Answer length limit.")] = 64,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object, no streaming.")] = False,
    show_sources: Annotated[bool, typer.Option(help="List the retrieved chunks after the answer.")] = False,
    device: DeviceOption = "auto",
    dtype: DtypeOption = "auto",
) -> None:
    """Retrieve chunks for QUESTION, bring their stored caches into the generator's space, and
    answer without the generator re-reading the text.

    TTFT counts from the question to the first token; one-time costs (loading the models, the
    first forward pass) are reported apart as warm-up.
    """
    from cag.ask import ask, check_question

    check_question(question, mode, top_k)
    stream = None if as_json else _stream
    result = ask(question, store, model, top_k, mode, max_new_tokens, on_token=stream,
                 min_retention=min_retention, device=device, dtype=dtype, blend=blend)
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
