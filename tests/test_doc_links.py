"""Every relative link in the user-facing docs (README.md, docs/*.md and each folder's README.md)
names a file or folder of the repository: a number's record, a script, another page."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)  # fenced code blocks hold no links
CODE_SPAN = re.compile(r"`[^`\n]*`")
INLINE = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)  # [name]: target
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def doc_files() -> list[Path]:
    readmes = [p for p in ROOT.rglob("README.md") if not {".venv", "records", "runs", ".git"} & set(p.parts)]
    return sorted(set(readmes) | set((ROOT / "docs").glob("*.md")))


def link_targets(text: str) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return INLINE.findall(text) + DEFINITION.findall(text)


def dead_links(page: Path) -> list[str]:
    """`page: target` for each relative link of `page` that names nothing in the repository."""
    dead = []
    for target in link_targets(page.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if not path or EXTERNAL.match(path):
            continue  # an anchor on the same page, or a web address
        resolved = (page.parent / path).resolve()
        if not resolved.exists() or not resolved.is_relative_to(ROOT):
            dead.append(f"{page.relative_to(ROOT)}: {target}")
    return dead


def test_the_checked_pages_include_the_readme_the_docs_and_the_folder_readmes():
    names = {str(p.relative_to(ROOT)) for p in doc_files()}
    assert {"README.md", "docs/results.md", "translators/README.md", "benchmarks/gpu/README.md"} <= names


def test_the_link_reader_finds_inline_and_defined_links_and_skips_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [a](a.md#part), [`b`](../b/ \"title\") and [c].\n\n[c]: c.json\n"
                    "`[not](code.md)`\n```\n[nor](block.md)\n```\n[web](https://example.com) [here](#top)\n")
    assert link_targets(page.read_text()) == ["a.md#part", "../b/", "https://example.com", "#top", "c.json"]


def test_every_relative_link_in_the_docs_names_an_existing_file_or_folder():
    dead = [link for page in doc_files() for link in dead_links(page)]
    assert not dead, f"{len(dead)} dead links:\n" + "\n".join(dead)
