"""Every relative link in the repository's Markdown (README, docs/, benchmarks/, packages/)
points at a file or directory that exists, so moving a page or a script cannot leave a dead
link behind."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    """The targets of `[text](target)` links that are paths in this repository (no scheme, no
    pure anchor), without their `#anchor`."""
    links = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        links.append(target.split("#", 1)[0])
    return links


def test_relative_links_skips_urls_and_anchors():
    text = "[a](docs/x.md) [b](https://e.org/y) [c](#here) [d](../z.md#part) [e](mailto:q@e.org)"
    assert relative_links(text) == ["docs/x.md", "../z.md"]


def markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    dead = [
        t
        for t in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / t).exists()
    ]
    assert dead == [], f"{page.relative_to(ROOT)}: dead links {dead}"
