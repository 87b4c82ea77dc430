"""`cag train`: learn a MoT translator (or a baseline) from a source model's caches to a target's.

Every option but --qa-check and --install is a field of mot.training.config.TrainConfig, with its
default and help."""

from typing import Annotated

import typer

from cag.errors import CagError
from cag.translations import TranslationId
from cli._errors import handle_errors
from cli.config_options import with_config
from cli.progress_display import progress_bars
from mot.training.config import TrainConfig


@handle_errors
@with_config(TrainConfig, ("source", "target", "corpus", "heldout_corpus", "kind", "mode", "window", "experts",
                           "top_k", "rank", "pairs_per_layer", "target_embeddings", "token_rank", "dtype", "steps",
                           "batch", "lr", "windows", "heldout_windows", "chunk_tokens", "chunks",
                           "continuation_tokens", "eval_every", "checkpoint_every", "device", "seed", "data", "init",
                           "out"))
def train_command(
    qa_check: Annotated[int, typer.Option(min=0, help="After training, answer N SQuAD questions in direct "
                                                      "and translated mode and record the retention "
                                                      "(read by ask's --mode auto quality gate).")] = 0,
    install: Annotated[bool, typer.Option(help="Copy the result into $CAG_HOME/translators/ so ask and eval "
                                               "find it.")] = True,
    config: TrainConfig = None,
) -> None:
    """Train a translator from SOURCE's chunk caches to TARGET's.

    Prepares context windows (chunks prefilled independently by both models, the target reading
    the text then the continuation as teacher) once, fits the closed-form ridge start, then trains with
    reconstruction + context correction (KL and continuation K/V) + router balance losses.
    Writes a run folder with config, metrics over time and the checkpoint (safetensors + JSON).
    """
    from eval.qa_check import qa_check as run_qa_check  # heavy imports: only when a command runs
    from mot.checkpoint import read_record
    from mot.registry import install as install_translator
    from mot.training.train import train

    if qa_check and not install:
        raise CagError("--qa-check answers through the installed translator: drop --no-install.")
    with progress_bars() as progress:
        run = train(config, progress)
    translation = TranslationId(config.source, config.target, config.kind)
    checkpoint = run / "translator.safetensors"
    if install:
        typer.echo(f"Installed {install_translator(checkpoint, translation)}")
    if qa_check:
        result = run_qa_check(checkpoint, translation, qa_check, run / "qa-check", reinstall=install)
        typer.echo(f"QA check ({qa_check} SQuAD questions): direct F1 {result['direct_f1']}, "
                   f"{config.kind} F1 {result['f1']}, retention {result['retention']}")
    record = read_record(checkpoint)
    held = record["spec"]["metrics"]["heldout"]
    typer.echo(f"Translator {checkpoint} ({record['parameters']:,} parameters): held-out " +
               "; ".join(f"{m}: KL {v['kl']}, top-1 {v['top1']}" for m, v in held.items() if isinstance(v, dict)))
