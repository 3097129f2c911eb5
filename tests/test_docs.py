"""The documentation's relative links resolve, and the README stays a page for users.

Every relative Markdown link in README.md, CHANGELOG.md and docs/*.md must name a file that
exists; a ``file.md#anchor`` (or ``#anchor``) link must name a heading of that file, slugged as
GitHub does: lowercase, punctuation other than '-' and '_' dropped, spaces turned into '-', and
'-1', '-2', ... appended to repeated headings. Links inside code (fenced blocks, backticks) and
absolute URLs are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files(root: Path = ROOT) -> list[Path]:
    """The Markdown pages whose links are checked."""
    files = [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link outside code."""
    out = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = INLINE_CODE.sub("", line)
        out += [(number, m.group(1)) for m in LINK.finditer(line)]
        ref = REFERENCE.match(line)
        if ref:
            out.append((number, ref.group(1)))
    return out


def broken_links(path: Path) -> list[str]:
    """'file:line: target (why)' for every relative link of ``path`` that does not resolve."""
    problems = []
    for number, target in links(path):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue  # absolute URL (http:, https:, mailto:, ...)
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        where = f"{path.name}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and unquote(anchor).lower() not in anchors(dest):
            problems.append(f"{where} (no heading with anchor #{anchor} in {dest.name})")
    return problems


def test_the_documentation_pages_exist():
    names = {f.relative_to(ROOT).as_posix() for f in doc_files()}
    assert {"README.md", "CHANGELOG.md"} <= names
    assert any(n.startswith("docs/") for n in names)


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert links(page) or page.name == "gpu.md", f"{page} has no links (parser broken?)"
    assert broken_links(page) == []


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_checker_catches_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# Page A\n\n## The gate and the score scale (`lasr.scale_free`)\n\n## Notes\n\n## Notes\n",
        encoding="utf-8",
    )
    good = [
        "[a](docs/a.md)",
        "[gate](docs/a.md#the-gate-and-the-score-scale-lasrscale_free)",
        "[second notes](docs/a.md#notes-1)",
        "[self](#top-heading)",
        "[web](https://example.org/missing.md)",
        "`[in code](docs/missing.md)`",
    ]
    bad = ["[gone](docs/missing.md)", "[no anchor](docs/a.md#the-gate)", "[self](#nowhere)"]
    text = "# Top heading\n\n" + "\n".join(good + bad) + "\n\n```\n[fenced](nope.md)\n```\n"
    (tmp_path / "README.md").write_text(text, encoding="utf-8")
    found = broken_links(tmp_path / "README.md")
    assert [p.split(": ", 1)[1].split(" (")[0] for p in found] == [
        "docs/missing.md",
        "docs/a.md#the-gate",
        "#nowhere",
    ]
    assert "no such file" in found[0] and "no heading" in found[1]


def test_slug_follows_github():
    assert slug("Errors, secrets and crash safety") == "errors-secrets-and-crash-safety"
    assert slug("The Actor's step size") == "the-actors-step-size"
    assert slug("Reasoning (`lira reason`)") == "reasoning-lira-reason"
    assert slug("pass@k pools (Table 15)") == "passk-pools-table-15"
    assert slug("[0.1.0] - 2026-11-24") == "010---2026-11-24"
