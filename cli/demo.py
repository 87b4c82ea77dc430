"""`cag demo`: prefill a sample passage once, store and reload its cache, answer from it."""

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from cag.defaults import DEFAULT_GENERATOR
from cli._errors import handle_errors


@handle_errors
def demo_command(
    model: Annotated[str, typer.Option("--model", "-m", envvar="CAG_MODEL",
                                       help="Model alias, hub id, folder or .gguf file.")] = DEFAULT_GENERATOR,
    dtype: Annotated[str, typer.Option(help="Storage dtype of the chunk cache: fp32, fp16 or bf16.")] = "fp16",
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Answer length limit.")] = 16,
) -> None:
    """Store a passage's KV cache once, reload it, and answer questions from it.

    Each answer is also produced from the full prompt, so you can compare them and their TTFT.
    """
    from cag.demo import run_demo

    console = Console(width=140)
    console.print(f"Loading {model} (the first use converts the GGUF once, up to a minute)...")
    report = run_demo(model, dtype=dtype, max_new_tokens=max_new_tokens)
    console.print(f"Loaded {report.model} in {report.load_seconds:.1f} s. Prefilled the passage "
                  f"({report.passage_tokens} tokens) in {report.prefill_seconds:.2f} s; stored "
                  f"{report.cache_bytes / 1e6:.2f} MB ({report.dtype}) at {report.cache_path}, reloaded.")
    table = Table(title="answers: from the stored cache vs from the full prompt")
    for column in ("question", "gold", "from stored cache", "from full prompt", "same", "TTFT cache / prompt (ms)"):
        table.add_column(column)
    for a in report.answers:
        table.add_row(a.question, " | ".join(a.gold), a.from_cache, a.from_prompt,
                      "yes" if a.same else "no", f"{a.ttft_cache_ms:.0f} / {a.ttft_prompt_ms:.0f}")
    console.print(table)
