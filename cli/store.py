"""`cag store`: see and manage a store.

(Library modules are imported inside the commands: they pull in torch, which would slow every
`cag --help`.)"""

import json
from pathlib import Path
from typing import Annotated

import typer

from cag.errors import CagError
from cag.store.spaces import Role
from cli._errors import handle_errors
from cli.options import StoreOption
from cli.text import printable

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
        typer.echo(f"{key:14} {printable(info[key])}")
    if info["catalog_integrity"] != "ok":
        typer.echo(f"{'catalog':14} damaged (SQLite: {printable(info['catalog_integrity'])}): run `cag store check "
                   f"--repair --store {printable(info['store'])}`")
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
        rows = opened.catalog.file_chunk_counts()
    finally:
        opened.close()
    for path, chunks in rows:
        typer.echo(f"{chunks:6}  {printable(path)}")


PRUNABLE = (Role.TRANSLATED, Role.NATIVE)


@app.command("prune")
@handle_errors
def prune_command(
        role: Annotated[str, typer.Option(help="translated: caches translators made for a generator "
                                               "(re-made on the next ask that needs them); native: "
                                               "a generator's own caches (re-made by `cag ingest "
                                               "--also-for`). The encoder's caches are never pruned.")]
        = "translated",
        model: Annotated[str | None, typer.Option("--model", "-m", help="Only this generator's caches "
                                                  "(name as `cag store info` shows it).")] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be freed; delete nothing.")] = False,
        store: StoreOption = None) -> None:
    """Free disk: delete derived cache spaces (translated, or native) a store can re-create."""
    from cag.store import Store

    if role not in set(PRUNABLE):
        raise CagError(f"--role must be one of {', '.join(PRUNABLE)} (got {role!r}). The encoder's caches are never "
                       "pruned (translated modes read them): `cag store remove` removes documents instead.")
    role = Role(role)
    opened = Store.open(store)
    try:
        spaces = [s for s in opened.spaces() if s.role is role and (model is None or s.generator == model)]
        if not spaces:
            known = sorted({s.generator for s in opened.spaces() if s.role is role})
            raise CagError(f"No {role} caches" + (f" for {model}" if model else "") + f" in store {opened.folder}"
                           + (f"; it has {role} caches for: {', '.join(known)}." if known else "."))
        total_files = total_bytes = 0
        with opened.lock():
            for space in spaces:
                count, freed = opened.space_usage(space) if dry_run else opened.remove_space(space)
                total_files, total_bytes = total_files + count, total_bytes + freed
                typer.echo(f"{'would free' if dry_run else 'freed':10} {freed / 1e6:10.1f} MB  "
                           f"{count:6} files  {space.model_name} ({space.role})")
    finally:
        opened.close()
    typer.echo(f"{'Would free' if dry_run else 'Freed'} {total_bytes / 1e6:.1f} MB in {total_files} files "
               f"from {len(spaces)} cache space(s) of {opened.folder}.")


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
                raise CagError(f"None of {', '.join(targets)} is in store {opened.folder}; "
                               "`cag store list` shows what is.")
            opened.remove_paths(chosen)
    finally:
        opened.close()
    typer.echo(f"Removed {len(chosen)} file(s) from {opened.folder}.")


@app.command("check")
@handle_errors
def check_command(
        repair: Annotated[bool, typer.Option("--repair", help="Rebuild what is derived (the index, caches of documents "
                                             "still on disk, translations, a damaged catalog from what is "
                                             "intact) and say what cannot be rebuilt.")] = False,
        store: StoreOption = None) -> None:
    """Check the whole store: the catalog (SQLite integrity, every chunk row against its digests), the
    FAISS index, every cache file, orphans and anything that is not cag's. Prints what is wrong, one
    line each, and exits with code 1 if anything is."""
    from cag.repair import repair_store
    from cag.store.check import check_store
    from cli.progress_display import progress_bars

    with progress_bars() as progress:
        result = repair_store(store, progress) if repair else None
        report = result.after if result else check_store(store, progress)
    if result:
        for line in result.done:
            typer.echo(f"repaired: {printable(line)}")
        for line in result.not_repaired:
            typer.echo(f"not repaired: {printable(line)}")
    counts = report.counts
    typer.echo(f"Store {printable(report.store)}: {counts.get('chunks', '?')} chunks, {counts.get('spaces', 0)} "
               f"cache spaces, {counts.get('cache_files', 0)} cache files checked.")
    for problem in report.problems:
        typer.echo(f"{problem.kind}: {printable(problem.message)}")
    for note in report.notes:
        typer.echo(f"note: {printable(note)}")
    if report.problems:
        fixable = sum(p.repairable for p in report.problems)
        hint = (f" {fixable} can be repaired: `cag store check --repair --store {printable(report.store)}`."
                if fixable and not repair else "")
        typer.echo(f"{len(report.problems)} problem(s).{hint}")
        raise typer.Exit(1)
    typer.echo("No problems found.")
