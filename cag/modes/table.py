"""What the registry says about its modes, in words: `cag ask --help`'s mode text and the mode
table of docs/modes.md come from here, so neither is written by hand (tests/test_modes_doc.py
checks that the page holds the table the registry makes).

    python -m cag.modes.table --write docs/modes.md    # rewrite the page's generated table
"""

import argparse
import re
from pathlib import Path

from cag.modes.registry import AUTO, modes

BEGIN = "<!-- modes table: generated from the registry by `python -m cag.modes.table --write docs/modes.md` -->"
END = "<!-- end of the generated modes table -->"


def mode_help() -> str:
    """The --mode option's help: every registered mode and what it is."""
    parts = [f"{AUTO}: native if stored, else a translation whose recorded quality clears "
             "--min-retention, else direct"]
    parts += [f"{m.name}: {m.help}" for m in modes()]
    return "; ".join(parts) + " (docs/modes.md)."


def modes_table() -> str:
    """The Markdown table of every registered mode."""
    rows = ["| mode | what it is | the generator computes | stored per token |", "|---|---|---|---|"]
    rows += [f"| `{m.name}` | {m.help} | {m.computes} | {m.stores} |" for m in modes()]
    return "\n".join(rows)


def generated_block() -> str:
    return f"{BEGIN}\n{modes_table()}\n{END}"


def rewrite(page: Path) -> bool:
    """Put the current table into `page` between the markers; whether it changed."""
    text = page.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{page} has no generated modes table (markers {BEGIN!r} ... {END!r})")
    new = pattern.sub(lambda _: generated_block(), text)
    page.write_text(new, encoding="utf-8")
    return new != text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="rewrite this page's generated table")
    args = parser.parse_args()
    if args.write:
        print(f"{args.write}: {'updated' if rewrite(args.write) else 'already current'}")
    else:
        print(modes_table())


if __name__ == "__main__":
    main()
