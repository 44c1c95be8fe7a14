"""The manual stays true to the code: every Python block of README.md and docs/*.md compiles, the blocks marked
``<!-- test: run -->`` (the line just before the block) run in a temporary folder, on the real default model where
they load one, and every relative link resolves to a file in the repository (and its ``#anchor`` to a heading).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_MARK = "<!-- test: run -->"
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
#: Packages of the optional extras: a marked block that needs one is skipped where it is not installed.
OPTIONAL = {"langchain_core", "langchain_qdrant", "llama_index", "mcp", "ray"}


@dataclass(frozen=True)
class Block:
    """A fenced code block: where it starts, its language, its code, and whether it is marked to run."""

    page: Path
    line: int
    language: str
    code: str
    run: bool

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse(page: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The page's code blocks, and its other lines (line number, text) where headings and links live."""
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, start = opening.group(2), i
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        assert i < len(lines), f"{page.relative_to(ROOT)}:{start + 1}: code block never closed"
        before = next((line.strip() for line in reversed(lines[:start]) if line.strip()), "")
        code = textwrap.dedent("\n".join(lines[start + 1 : i]))
        blocks.append(Block(page, start + 1, opening.group(3).lower(), code, before == RUN_MARK))
        i += 1
    return blocks, prose


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of the page's headings (a repeated heading gets ``-1``, ``-2``, ... as on GitHub)."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in parse(page)[1]:
        if match := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line):
            base = slug(match.group(1))
            count = counts.get(base, 0)
            counts[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


BLOCKS = [block for page in PAGES for block in parse(page)[0]]
PYTHON = [block for block in BLOCKS if block.language == "python"]


def test_the_manual_is_there() -> None:
    """The README is a front door (at most 300 lines), the manual has its pages, and its map lists every one."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300
    pages = sorted(path.name for path in (ROOT / "docs").glob("*.md"))
    assert len(pages) >= 8, pages
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    missing = [name for name in pages if name != "index.md" and f"]({name})" not in index]
    assert not missing, f"docs/index.md does not list: {missing}"
    assert any(block.run for block in PYTHON if block.page.name == "README.md"), "the README quickstart must run"


@pytest.mark.parametrize("block", PYTHON, ids=str)
def test_python_blocks_compile(block: Block) -> None:
    compile(block.code, str(block), "exec")


@pytest.mark.slow
@pytest.mark.parametrize("block", [block for block in PYTHON if block.run], ids=str)
def test_marked_blocks_run(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each marked block runs on its own, from an empty folder, with the library's folders kept inside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SBERT_QDRANT_LOCATION", str(tmp_path / "sbert_qdrant_data"))
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        exec(compile(block.code, str(block), "exec"), {"__name__": "__docs__"})
    except ModuleNotFoundError as error:  # a page about an optional extra, without that extra installed
        if error.name is None or error.name.partition(".")[0] not in OPTIONAL:
            raise
        pytest.skip(f"{error.name} is not installed (an optional extra)")


def test_relative_links_resolve() -> None:
    broken = []
    for page in PAGES:
        for number, line in parse(page)[1]:
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                if re.match(r"^[a-z][a-z+.-]*:", target):  # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve() if path else page
                if not resolved.exists():
                    broken.append(f"{page.relative_to(ROOT)}:{number}: {target} (no such file)")
                elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                    broken.append(f"{page.relative_to(ROOT)}:{number}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
