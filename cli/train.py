"""`cag train`: learn a MoT translator (or a baseline) from a source model's caches to a target's.

Every option is a field of mot.training.config.TrainConfig, and its default is that field's default."""

from pathlib import Path
from typing import Annotated

import typer

from cag.errors import CagError
from cag.translations import TranslationId
from cli._errors import handle_errors
from cli.options import parse_layer_window
from cli.progress_display import progress_bars
from mot.training.config import TrainConfig

D = TrainConfig()  # the defaults


@handle_errors
def train_command(
    source: Annotated[str, typer.Option(help="Model whose chunk caches are translated (the encoder).")] = D.source,
    target: Annotated[str, typer.Option(help="Generator the caches are translated into.")] = D.target,
    corpus: Annotated[list[Path] | None, typer.Option(help="Training text: .jsonl (field text) or .txt "
                                                           "files or folders; repeatable (default: the "
                                                           "packaged wikitext-2 part).")] = None,
    heldout: Annotated[list[Path] | None, typer.Option(help="Held-out text for evaluation.")] = None,
    kind: Annotated[str, typer.Option(help="mot (experts + router) | single (one expert per layer) | "
                                           "ridge (closed form, no training).")] = D.kind,
    mode: Annotated[str, typer.Option(help="full: every target layer translated (ask's default); "
                                           "window: a window of layers, the generator replays the rest.")] = D.mode,
    window: Annotated[str | None, typer.Option(help="mode window: target layers START:END "
                                                    "(default: the middle third).")] = None,
    experts: Annotated[int, typer.Option(min=1, help="Experts per K/V mixture (kind mot).")] = D.experts,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Experts mixed per token.")] = D.top_k,
    rank: Annotated[int, typer.Option(min=1, help="Hidden width of each expert's MLP.")] = D.rank,
    attention_dim: Annotated[int, typer.Option(min=0, help="Width of a bidirectional attention over each "
                                                           "chunk's tokens in front of every layer's "
                                                           "mixtures (0: none; kinds mot and single).")] = D.attention_dim,
    attention_heads: Annotated[int, typer.Option(min=1, help="Heads of that attention.")] = D.attention_heads,
    source_layers: Annotated[int, typer.Option(min=1, help="Source layers each target layer reads (the ones "
                                                           "nearest in relative depth; their K and V).")] = D.pairs_per_layer,
    target_embeddings: Annotated[int, typer.Option(min=0, help="Give every layer's translator the target's own "
                                                               "input embeddings of each token and of the "
                                                               "N-1 tokens before it (a table lookup; 0: "
                                                               "none).")] = D.target_embeddings,
    token_rank: Annotated[int, typer.Option(min=0, help="Project those embedding features to this width, one "
                                                        "map for every layer (fitted in closed form; 0: full "
                                                        "width). Smaller and faster translators.")] = D.token_rank,
    weights_dtype: Annotated[str, typer.Option(help="Saved weights: fp16, fp32, bf16 or int8 (int8 rows with "
                                                    "per-row scales: half of fp16's size).")] = D.dtype,
    steps: Annotated[int, typer.Option(min=0, help="Optimizer steps.")] = D.steps,
    batch: Annotated[int, typer.Option(min=1, help="Windows per step.")] = D.batch,
    lr: Annotated[float, typer.Option(help="Peak learning rate (AdamW, warmup + cosine).")] = D.lr,
    windows: Annotated[int, typer.Option(min=1, help="Training windows prepared from the corpus.")] = D.windows,
    heldout_windows: Annotated[int, typer.Option(min=1, help="Held-out windows.")] = D.heldout_windows,
    chunk_tokens: Annotated[int, typer.Option(min=4, help="Tokens per context chunk.")] = D.chunk_tokens,
    chunks: Annotated[int, typer.Option(min=1, help="Independently prefilled chunks per context.")] = D.chunks,
    continuation_tokens: Annotated[int, typer.Option(min=2, help="Continuation tokens per window "
                                                                 "(continuation text).")] = D.continuation_tokens,
    continuation: Annotated[str, typer.Option(help="text: the running text after the context; cloze: a "
                                                   "fill-in-the-blank question about one fact of the "
                                                   "context and the target's own answer from the text "
                                                   "(trains for QA).")] = D.continuation,
    answer_tokens: Annotated[int, typer.Option(min=1, help="Continuation cloze: most tokens of the target's "
                                                          "answer.")] = D.answer_tokens,
    eval_every: Annotated[int, typer.Option(min=1, help="Held-out evaluation every N steps.")] = D.eval_every,
    checkpoint_every: Annotated[int, typer.Option(min=1, help="Checkpoint every N steps.")] = D.checkpoint_every,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N (training stays on CPU unless asked).")] = D.device,
    seed: Annotated[int, typer.Option(help="Seed for window sampling and initialization.")] = D.seed,
    qa_check: Annotated[int, typer.Option(min=0, help="After training, answer N SQuAD questions in direct "
                                                      "and translated mode and record the retention "
                                                      "(read by ask's --mode auto quality gate).")] = 0,
    data: Annotated[Path | None, typer.Option(help="Folder for the prepared windows (default OUT/data); runs "
                                                   "with the same models and window settings can share it.")] = None,
    init: Annotated[Path | None, typer.Option(help="Continue from this trained translator (NAME or "
                                                   "NAME.safetensors, the same options) instead of the "
                                                   "ridge start, e.g. a text-trained MoT tuned on "
                                                   "--continuation cloze.")] = None,
    key_loss: Annotated[str, typer.Option(help="Keys' reconstruction loss: nmse (normalized squared error) "
                                               "or query (the logit error the target's own queries would "
                                               "see).")] = D.key_loss,
    install: Annotated[bool, typer.Option(help="Copy the result into $CAG_HOME/translators/ so ask and eval "
                                               "find it.")] = True,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/train-SOURCE__TARGET__KIND-MODE). "
                                                  "Re-running the same command resumes it.")] = None,
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
    cfg = TrainConfig(
        source=source, target=target, out=str(out or ""), kind=kind, mode=mode,
        corpus=tuple(map(str, corpus)) if corpus else D.corpus,
        heldout_corpus=tuple(map(str, heldout)) if heldout else D.heldout_corpus,
        window=parse_layer_window(window), experts=experts, top_k=top_k, rank=rank,
        attention_dim=attention_dim, attention_heads=attention_heads, target_embeddings=target_embeddings,
        token_rank=token_rank, pairs_per_layer=source_layers, windows=windows, heldout_windows=heldout_windows,
        chunk_tokens=chunk_tokens, chunks=chunks, continuation_tokens=continuation_tokens,
        continuation=continuation, answer_tokens=answer_tokens, steps=steps, batch=batch, lr=lr,
        eval_every=eval_every, checkpoint_every=checkpoint_every, seed=seed, device=device,
        dtype=weights_dtype, data=str(data) if data else None, init=str(init) if init else None,
        key_loss=key_loss)
    with progress_bars() as progress:
        run = train(cfg, progress)
    translation = TranslationId(source, target, cfg.kind)
    checkpoint = run / "translator.safetensors"
    if install:
        typer.echo(f"Installed {install_translator(checkpoint, translation)}")
    if qa_check:
        result = run_qa_check(checkpoint, translation, qa_check, run / "qa-check", reinstall=install)
        typer.echo(f"QA check ({qa_check} SQuAD questions): direct F1 {result['direct_f1']}, "
                   f"{kind} F1 {result['f1']}, retention {result['retention']}")
    record = read_record(checkpoint)
    held = record["spec"]["metrics"]["heldout"]
    typer.echo(f"Translator {checkpoint} ({record['parameters']:,} parameters): held-out " +
               "; ".join(f"{m}: KL {v['kl']}, top-1 {v['top1']}" for m, v in held.items() if isinstance(v, dict)))
