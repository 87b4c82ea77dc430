"""Every registered mode is documented where users look: in `cag ask --help` and in docs/modes.md's
table, which is generated from the registry (`python -m cag.modes.table --write docs/modes.md`)."""

from pathlib import Path

from typer.testing import CliRunner

from cag.modes import modes
from cag.modes.table import BEGIN, END, generated_block, mode_help, modes_table
from cli.main import app

PAGE = Path(__file__).resolve().parents[1] / "docs" / "modes.md"


def test_every_registered_mode_says_what_it_is_computes_and_stores():
    registered = modes()
    assert {"direct", "native", "none", "native-blend", "translated", "translated-blend"} <= {m.name for m in registered}
    for mode in registered:
        assert mode.help and mode.computes and mode.stores, mode.name
        assert f"| `{mode.name}` | {mode.help} |" in modes_table()


def test_the_docs_table_is_the_one_the_registry_makes():
    text = PAGE.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == generated_block(), \
        "docs/modes.md is stale: run `python -m cag.modes.table --write docs/modes.md`"


def test_ask_help_names_every_mode():
    result = CliRunner().invoke(app, ["ask", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    words = " ".join(result.output.split())  # the help is wrapped into a box
    for mode in modes():
        assert f"{mode.name}:" in words, mode.name
    assert mode_help().startswith("auto:")


def test_the_usage_pages_option_tables_are_the_commands_own():
    """docs/usage.md's option tables come from the commands (and so from the configs' fields)."""
    from cli.doc_tables import BEGIN, COMMANDS, END, options_table

    text = (PAGE.parent / "usage.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        start = text.index(BEGIN.format(name=name))
        end = text.index(END.format(name=name))
        held = text[start:end].split("\n", 1)[1].rstrip("\n")
        assert held == options_table(name), \
            f"docs/usage.md's `cag {name}` table is stale: run `python -m cli.doc_tables --write docs/usage.md`"
    assert "`--top-k`, `-k` | `3` |" in options_table("ask")  # the default, as AskOptions declares it
