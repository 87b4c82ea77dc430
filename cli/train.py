"""`cag train`: learn a MoT translator (or a baseline) from a source model's caches to a target's."""

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from cag.defaults import DEFAULT_ENCODER, DEFAULT_GENERATOR
from cli._errors import handle_errors
from cli.progress_display import progress_display
from cli.options import parse_layer_window

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO / "data" / "corpus" / "wikitext2" / "train_raw_part.jsonl"
DEFAULT_HELDOUT = REPO / "data" / "corpus" / "wikitext2" / "valid.jsonl"


def _bars():
    from mot.train import Progress as TrainProgress

    class Bars(TrainProgress):
        def __init__(self, progress: Progress):
            self.progress, self.task = progress, None

        def phase(self, name: str, total: int) -> None:
            self.task = self.progress.add_task(name, total=total, info="")

        def advance(self, n: int = 1, **info) -> None:
            text = "  ".join(f"{k} {v:.4f}" for k, v in info.items())
            self.progress.update(self.task, advance=n, info=text)
    return Bars


@handle_errors
def train_command(
    source: Annotated[str, typer.Option(help="Model whose chunk caches are translated (the encoder).")] = DEFAULT_ENCODER,
    target: Annotated[str, typer.Option(help="Generator the caches are translated into.")] = DEFAULT_GENERATOR,
    corpus: Annotated[list[Path] | None, typer.Option(help="Training text: .jsonl (field text) or "
                                                           ".txt files or folders; repeatable.")] = None,
    heldout: Annotated[list[Path] | None, typer.Option(help="Held-out text for evaluation.")] = None,
    kind: Annotated[str, typer.Option(help="mot (experts + router) | single (one expert per layer) | "
                                           "ridge (closed form, no training).")] = "mot",
    mode: Annotated[str, typer.Option(help="full: every target layer translated (ask's default); "
                                           "window: a window of layers, the generator replays the rest.")] = "full",
    window: Annotated[str | None, typer.Option(help="mode window: target layers START:END "
                                                    "(default: the middle third).")] = None,
    experts: Annotated[int, typer.Option(min=1, help="Experts per K/V mixture (kind mot).")] = 4,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Experts mixed per token.")] = 2,
    rank: Annotated[int, typer.Option(min=1, help="Hidden width of each expert's MLP.")] = 24,
    attention_dim: Annotated[int, typer.Option(min=0, help="Width of a bidirectional attention over "
                                                           "each chunk's tokens in front of every "
                                                           "layer's mixtures (0: none; kinds mot and "
                                                           "single).")] = 0,
    attention_heads: Annotated[int, typer.Option(min=1, help="Heads of that attention.")] = 4,
    source_layers: Annotated[int, typer.Option(min=1, help="Source layers each target layer reads (the "
                                                           "ones nearest in relative depth; their K "
                                                           "and V).")] = 2,
    target_embeddings: Annotated[int, typer.Option(min=0, help="Give every layer's translator the "
                                                               "target's own input embeddings of each "
                                                               "token and of the N-1 tokens before it "
                                                               "(a table lookup; 0: none; the shipped "
                                                               "translators use 2).")] = 2,
    token_rank: Annotated[int | None, typer.Option(min=0, help="Project those embedding features to "
                                                               "this width, one map for every layer "
                                                               "(fitted in closed form; 0: full width; "
                                                               "default 512 with embeddings, as "
                                                               "shipped). Smaller and faster "
                                                               "translators.")] = None,
    weights_dtype: Annotated[str, typer.Option(help="Saved weights: fp16, fp32, bf16 or int8 (int8 rows "
                                                    "with per-row scales: half of fp16's size).")] = "fp16",
    steps: Annotated[int, typer.Option(min=0, help="Optimizer steps.")] = 120,
    batch: Annotated[int, typer.Option(min=1, help="Windows per step.")] = 4,
    lr: Annotated[float, typer.Option(help="Peak learning rate (AdamW, warmup + cosine).")] = 1e-3,
    windows: Annotated[int, typer.Option(min=1, help="Training windows prepared from the corpus.")] = 256,
    heldout_windows: Annotated[int, typer.Option(min=1, help="Held-out windows.")] = 32,
    chunk_tokens: Annotated[int, typer.Option(min=4, help="Tokens per context chunk.")] = 64,
    chunks: Annotated[int, typer.Option(min=1, help="Independently prefilled chunks per context.")] = 2,
    continuation_tokens: Annotated[int, typer.Option(min=2, help="Continuation tokens per window "
                                                                 "(continuation text).")] = 32,
    continuation: Annotated[str, typer.Option(help="text: the running text after the context; cloze: a "
                                                   "fill-in-the-blank question about one fact of the "
                                                   "context and the target's own answer from the text "
                                                   "(trains for QA).")] = "text",
    answer_tokens: Annotated[int, typer.Option(min=1, help="Continuation cloze: most tokens of the "
                                                          "target's answer.")] = 12,
    eval_every: Annotated[int, typer.Option(min=1, help="Held-out evaluation every N steps.")] = 40,
    checkpoint_every: Annotated[int, typer.Option(min=1, help="Checkpoint every N steps.")] = 20,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N (training stays on CPU unless asked).")] = "cpu",
    seed: Annotated[int, typer.Option(help="Seed for window sampling and initialization.")] = 0,
    qa_check: Annotated[int, typer.Option(min=0, help="After training, answer N SQuAD questions in direct "
                                                      "and translated mode and record the retention "
                                                      "(read by ask's --mode auto quality gate).")] = 0,
    data: Annotated[Path | None, typer.Option(help="Folder for the prepared windows (default OUT/data); "
                                                   "runs with the same models and window settings "
                                                   "can share it.")] = None,
    init: Annotated[Path | None, typer.Option(help="Continue from this trained translator (NAME or "
                                                   "NAME.safetensors, the same options) instead of "
                                                   "the ridge start, e.g. a text-trained MoT tuned "
                                                   "on --continuation cloze.")] = None,
    key_loss: Annotated[str, typer.Option(help="Keys' reconstruction loss: nmse (normalized squared "
                                               "error) or query (the logit error the target's own "
                                               "queries would see: errors in what attention reads "
                                               "cost most, constant offsets nothing).")] = "nmse",
    install: Annotated[bool, typer.Option(help="Copy the result into $CAG_HOME/translators/ so ask "
                                               "and eval find it.")] = True,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/train-SOURCE-TARGET-KIND-MODE). "
                                                  "Re-running the same command resumes it.")] = None,
) -> None:
    """Train a translator from SOURCE's chunk caches to TARGET's.

    Prepares context windows (chunks prefilled independently by both models, the target reading
    the text then the continuation as teacher) once, fits the closed-form ridge start, then trains with
    reconstruction + context correction (KL and continuation K/V) + router balance losses.
    Writes a run folder with config, metrics over time and the checkpoint (safetensors + JSON).
    """
    from mot.registry import file_stem, install as install_translator
    from mot.train import TrainConfig, train

    if qa_check and not install:
        from cag.errors import CagError
        raise CagError("--qa-check answers through the installed translator: drop --no-install.")
    corpus = corpus or [DEFAULT_CORPUS]
    heldout = heldout or [DEFAULT_HELDOUT]
    suffix = "" if continuation == "text" else f"-{continuation}"
    run = out or Path("runs") / f"train-{file_stem(source, target, kind)}-{mode}{suffix}"
    cfg = TrainConfig(source=source, target=target, out=str(run), corpus=[str(p) for p in corpus],
                      heldout_corpus=[str(p) for p in heldout], kind=kind, mode=mode,
                      window=parse_layer_window(window), experts=experts, top_k=top_k, rank=rank,
                      attention_dim=attention_dim, attention_heads=attention_heads,
                      target_embeddings=target_embeddings,
                      token_rank=(512 if target_embeddings else 0) if token_rank is None else token_rank,
                      pairs_per_layer=source_layers,
                      windows=windows, heldout_windows=heldout_windows, chunk_tokens=chunk_tokens,
                      chunks=chunks, continuation_tokens=continuation_tokens, continuation=continuation,
                      answer_tokens=answer_tokens, steps=steps, batch=batch,
                      lr=lr, eval_every=eval_every, checkpoint_every=checkpoint_every, seed=seed,
                      device=device, dtype=weights_dtype, data=str(data) if data else None,
                      init=str(init) if init else None, key_loss=key_loss)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
               TextColumn("{task.fields[info]}"))
    with progress_display(*columns) as progress:
        run = train(cfg, _bars()(progress))
    checkpoint = run / "translator.safetensors"
    if install:
        installed = install_translator(checkpoint, source, target, kind)
        typer.echo(f"Installed {installed}")
    if qa_check:
        from mot.qa_check import qa_check as run_qa_check
        result = run_qa_check(checkpoint, source, target, kind, qa_check, run / "qa-check",
                              reinstall=install)
        typer.echo(f"QA check ({qa_check} SQuAD questions): direct F1 {result['direct_f1']}, "
                   f"{kind} F1 {result['f1']}, retention {result['retention']}")
    from mot.checkpoint import read_record
    record = read_record(checkpoint)
    held = record["spec"]["metrics"]["heldout"]
    typer.echo(f"Translator {checkpoint} ({record['parameters']:,} parameters): held-out " +
               "; ".join(f"{m}: KL {v['kl']}, top-1 {v['top1']}" for m, v in held.items() if isinstance(v, dict)))
