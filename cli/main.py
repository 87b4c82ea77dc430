"""The `cag` command line: one module per command, registered here."""

import logging
import os

import typer

from cli import store as store_cli
from cli.ask import ask_command
from cli.demo import demo_command
from cli.evaluate import eval_command
from cli.ingest import ingest_command
from cli.models import models_command
from cli.serve import serve_command
from cli.train import train_command

app = typer.Typer(
    help="cag: cache-augmented generation across heterogeneous language models. "
         "Prefill documents once, answer with any model from the stored caches.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.callback()
def _configure(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details.")):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # cag draws its own progress; loading bars are noise
    if not verbose:  # hub retries log warnings before cag's own one-line error
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    if os.environ.get("CAG_DEBUG") == "1":
        logging.getLogger("cag").setLevel(logging.DEBUG)


app.command("models")(models_command)
app.command("demo")(demo_command)
app.command("ingest")(ingest_command)
app.command("ask")(ask_command)
app.add_typer(store_cli.app, name="store")
app.command("eval")(eval_command)
app.command("train")(train_command)
app.command("serve")(serve_command)
