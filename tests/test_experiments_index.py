"""docs/experiments/: every study page is listed in the index (docs/experiments/README.md), and
every page gives the command that produced its figures (a fenced code block)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "docs" / "experiments"
PAGES = sorted(p.name for p in EXPERIMENTS.glob("*.md") if p.name != "README.md")


def indexed(text: str) -> set[str]:
    """The pages the index links to (`](name.md)` links to a page beside it)."""
    return set(re.findall(r"\]\(([\w.-]+\.md)\)", text))


def test_indexed_reads_local_page_links_only():
    assert indexed("| [A](a.md) | x | [b](../b.md) [c](c-d.md#part) |") == {"a.md"}


def test_every_page_is_in_the_index_and_the_index_names_no_missing_page():
    listed = indexed((EXPERIMENTS / "README.md").read_text(encoding="utf-8"))
    assert set(PAGES) - listed == set(), (
        f"add a row to docs/experiments/README.md for {sorted(set(PAGES) - listed)}"
    )
    assert listed - set(PAGES) == set(), (
        f"docs/experiments/README.md lists missing pages {sorted(listed - set(PAGES))}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_every_page_gives_its_command(page):
    assert "```" in (EXPERIMENTS / page).read_text(encoding="utf-8"), (
        f"{page}: no command (fenced code block)"
    )
