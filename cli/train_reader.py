"""`cag train-reader`: train a reader adapter (a LoRA on the generator, active on the question and
answer only) for the generator's own chunk caches or for a translator's.

Every option is a field of mot.reader_config.ReaderConfig, and its default is that field's default."""

from pathlib import Path
from typing import Annotated

import typer

from cli._errors import handle_errors
from cli.progress_display import progress_bars
from mot.reader_config import ReaderConfig

D = ReaderConfig()  # the defaults


def _counts(text: str) -> tuple:
    return tuple(int(x) for x in text.split(",") if x.strip())


@handle_errors
def train_reader_command(
    generator: Annotated[str, typer.Option(help="The generator the adapter is for.")] = D.generator,
    reads: Annotated[str, typer.Option(help="native: its own independently prefilled chunk caches; translated: "
                                            "the caches the installed MoT translator makes from the "
                                            "encoder's (the translator stays frozen).")] = D.reads,
    encoder: Annotated[str, typer.Option(help="The encoder (its tokenizer cuts the chunks; reads translated: "
                                              "its caches are translated).")] = D.encoder,
    corpus: Annotated[list[Path] | None, typer.Option(help="Training text (.jsonl with a text field, or .txt); "
                                                           "repeatable (default: the packaged wikitext-2 part). "
                                                           "Never an evaluation set.")] = None,
    heldout: Annotated[list[Path] | None, typer.Option(help="Held-out text for the held-out KL.")] = None,
    windows: Annotated[int, typer.Option(min=1, help="Training windows prepared from the corpus.")] = D.windows,
    heldout_windows: Annotated[int, typer.Option(min=1, help="Held-out windows.")] = D.heldout_windows,
    chunk_tokens: Annotated[int, typer.Option(min=16, help="Chunk length in encoder tokens (ingest's).")] = D.chunk_tokens,
    chunk_counts: Annotated[str, typer.Option(help="Chunks per window, drawn uniformly from this list.")] =
        ",".join(map(str, D.chunk_counts)),
    max_context_tokens: Annotated[int, typer.Option(min=16, help="Encoder tokens per window at most.")] = D.max_context_tokens,
    cloze: Annotated[int, typer.Option(min=0, help="Cloze questions per window.")] = D.cloze,
    generated: Annotated[int, typer.Option(min=0, help="Questions the generator writes per window.")] = D.generated,
    answer_tokens: Annotated[int, typer.Option(min=1, help="Most tokens of the teacher's answer.")] = D.answer_tokens,
    adapter: Annotated[str, typer.Option(help="lora: a LoRA on the generator, on for the question and answer; "
                                              "links: learned tokens after every chunk, computed by the "
                                              "unchanged generator at ask time (modes *+links).")] = D.adapter,
    link_tokens: Annotated[int, typer.Option(min=1, help="--adapter links: tokens after every chunk.")] = D.link_tokens,
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank.")] = D.rank,
    alpha: Annotated[float, typer.Option(help="LoRA alpha (scale alpha / rank).")] = D.alpha,
    targets: Annotated[str, typer.Option(help="Layers adapted: attention or attention+mlp.")] = D.targets,
    steps: Annotated[int, typer.Option(min=0, help="Optimizer steps.")] = D.steps,
    batch: Annotated[int, typer.Option(min=1, help="Questions per step.")] = D.batch,
    lr: Annotated[float, typer.Option(help="Peak learning rate (AdamW, warmup + cosine).")] = D.lr,
    eval_every: Annotated[int, typer.Option(min=1, help="Held-out evaluation every N steps.")] = D.eval_every,
    checkpoint_every: Annotated[int, typer.Option(min=1, help="Checkpoint every N steps.")] = D.checkpoint_every,
    dtype: Annotated[str, typer.Option(help="The generator's compute dtype (teacher and reader).")] = D.dtype,
    weights_dtype: Annotated[str, typer.Option(help="Saved adapter weights: fp16, bf16 or fp32.")] = D.weights_dtype,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = D.device,
    seed: Annotated[int, typer.Option(help="Seed for windows, questions and sampling.")] = D.seed,
    data: Annotated[Path | None, typer.Option(help="Folder of prepared windows (default OUT/data); native and "
                                                   "translated runs can share it.")] = None,
    install: Annotated[bool, typer.Option(help="Copy the result into $CAG_HOME/readers/ so the reader modes "
                                               "find it.")] = True,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/train-reader-GENERATOR-READS); "
                                                  "re-running the same command resumes it.")] = None,
) -> None:
    """Train a reader adapter: the generator learns to answer from stored chunk caches as it answers
    reading the text (KL on its own answers to cloze and self-written questions about training-corpus
    windows of several independently prefilled chunks)."""
    from cag.readers import file_stem, install as install_reader, read_record
    from mot.reader_train import train_reader

    cfg = ReaderConfig(generator=generator, reads=reads, encoder=encoder, out=str(out or ""),
                       data=str(data) if data else None,
                       corpus=tuple(map(str, corpus)) if corpus else D.corpus,
                       heldout_corpus=tuple(map(str, heldout)) if heldout else D.heldout_corpus,
                       windows=windows, heldout_windows=heldout_windows, chunk_tokens=chunk_tokens,
                       chunk_counts=_counts(chunk_counts), max_context_tokens=max_context_tokens, cloze=cloze,
                       generated=generated, answer_tokens=answer_tokens, adapter=adapter, link_tokens=link_tokens, rank=rank, alpha=alpha, targets=targets,
                       steps=steps, batch=batch, lr=lr, eval_every=eval_every, checkpoint_every=checkpoint_every,
                       seed=seed, dtype=dtype, weights_dtype=weights_dtype, device=device)
    with progress_bars() as progress:
        run = train_reader(cfg, progress)
    checkpoint = run / "reader.safetensors"
    record = read_record(checkpoint)
    spec = record["spec"]
    if install:
        stem = file_stem(spec["generator"], spec["reads_name"], spec.get("kind", "lora"))
        typer.echo(f"Installed {install_reader(checkpoint, stem)}")
    held = spec["metrics"]["heldout"]
    typer.echo(f"Reader adapter {checkpoint} ({record['parameters']:,} parameters) for {spec['generator']} reading "
               f"{spec['reads_name']}: held-out KL {held['without_adapter']['kl']} -> {held['with_adapter']['kl']}, "
               f"top-1 {held['without_adapter']['top1']} -> {held['with_adapter']['top1']}")
