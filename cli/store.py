"""`cag store`: see and manage a store."""

import json
from pathlib import Path
from typing import Annotated

import typer

from cli._errors import handle_errors
from cli.options import StoreOption

app = typer.Typer(help="See and manage a chunk-cache store.", no_args_is_help=True)


@app.command("info")
@handle_errors
def info_command(store: StoreOption = None,
                 as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Encoder, embedder, index, counts, bytes on disk, and which models have caches."""
    from cag.store import Store

    opened = Store.open(store)
    try:
        info = opened.info()
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    for key in ("store", "encoder", "embedder", "faiss_factory", "chunk_tokens", "cache_dtype",
                "files", "documents", "chunks", "tokens"):
        typer.echo(f"{key:14} {info[key]}")
    typer.echo(f"{'on disk':14} {info['bytes_on_disk'] / 1e6:.1f} MB"
               + (f" ({info['bytes_on_disk'] / max(info['tokens'], 1):,.0f} bytes per token)" if info["tokens"] else ""))
    for space in info["cache_spaces"]:
        typer.echo(f"{'caches':14} {space['model']} ({space['role']}): {space['files']} files, "
                   f"{space['bytes'] / 1e6:.1f} MB")


@app.command("list")
@handle_errors
def list_command(store: StoreOption = None) -> None:
    """Every ingested file with its number of chunks."""
    from cag.store import Store

    opened = Store.open(store)
    try:
        rows = opened.catalog.conn.execute(
            "SELECT d.path, COUNT(c.id) FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id "
            "GROUP BY d.path ORDER BY d.path").fetchall()
    finally:
        opened.close()
    for path, chunks in rows:
        typer.echo(f"{chunks:6}  {path}")


@app.command("remove")
@handle_errors
def remove_command(paths: Annotated[list[Path], typer.Argument(help="Ingested files or folders.")],
                   store: StoreOption = None) -> None:
    """Remove documents (by file, or every file under a folder) from the index and the store."""
    from cag.store import Store

    opened = Store.open(store)
    try:
        with opened.lock():
            targets = [str(Path(p).expanduser().resolve()) for p in paths]
            known = opened.catalog.paths()
            chosen = [k for k in known if any(k == t or Path(k).is_relative_to(t) for t in targets)]
            if not chosen:
                from cag.errors import CagError
                raise CagError(f"None of {', '.join(targets)} is in store {opened.folder}; "
                               "`cag store list` shows what is.")
            opened.remove_paths(chosen)
    finally:
        opened.close()
    typer.echo(f"Removed {len(chosen)} file(s) from {opened.folder}.")
