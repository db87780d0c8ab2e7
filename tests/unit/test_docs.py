"""The first page and the docs index hold together: links resolve, figures are sourced, every
annotation and label is in its table, and the two set-up commands stay on the first page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zeroscaler.core import annotations as a
from zeroscaler.core.coverage import PROBE_LABEL

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# Pages whose links and anchors are checked (the first page, the index and what it introduced).
PAGES = [
    REPO / "README.md",
    REPO / "CHANGELOG.md",
    *(
        DOCS / name
        for name in (
            "README.md", "troubleshooting.md", "safety.md", "operators.md", "annotations.md",
            "policy.md", "how-it-decides.md", "comparison.md", "platforms.md", "runbooks.md",
            "figures.md",
        )
    ),
]  # fmt: skip
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_of_the_page_resolves(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_first_page_keeps_the_two_set_up_commands_and_says_nothing_is_published() -> None:
    text = (REPO / "README.md").read_text()
    assert re.search(r"^make demo ", text, re.M)
    assert re.search(r"^make test ", text, re.M)
    assert "Nothing is published yet" in text
    # The path that works today comes before the one that needs a published release.
    assert text.index("make push REGISTRY=") < text.index("oci://ghcr.io/zeroscaler/charts")


def test_every_figure_the_first_page_shows_is_in_figures_md() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Figures") : readme.index("## Compatibility")]
    figures = " ".join((DOCS / "figures.md").read_text().replace("**", "").split())
    numbers = re.findall(r"\d[\d,.]*(?:\.\d+)?\s?(?:ms|s|MB|MiB|B|%|x)\b", table)
    assert len(numbers) > 20
    missing = [n for n in numbers if n not in figures and n.replace(" ", "") not in figures]
    assert not missing, f"figures on the first page that docs/figures.md does not hold: {missing}"


def test_every_annotation_and_label_is_in_the_table() -> None:
    table = (DOCS / "annotations.md").read_text()
    keys = {
        value
        for name, value in vars(a).items()
        if name.isupper()
        and isinstance(value, str)
        and value.startswith(a.PREFIX)
        and value != a.PREFIX
    }
    keys |= {*a.IBM_IDLE_TIMEOUT, a.IBM_WATCHED_KINDS, a.IBM_OWNED_KINDS, PROBE_LABEL}
    missing = sorted(k for k in keys if f"`{k}`" not in table)
    assert not missing, f"docs/annotations.md lacks {missing}"
