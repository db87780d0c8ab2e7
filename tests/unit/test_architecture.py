"""docs/architecture.md names every module of the product and of the shared development folders,
in its folder, and none that is gone."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAP = REPO / "docs" / "architecture.md"
_SECTION = re.compile(r"^## `([\w/]+)/`", re.M)


def sections() -> dict[str, set[str]]:
    """The modules each folder's section names: folder -> file names."""
    text = MAP.read_text()
    found: dict[str, set[str]] = {}
    starts = [m.start() for m in re.finditer(r"^## ", text, re.M)] + [len(text)]
    for head in _SECTION.finditer(text):
        body = text[head.end() : min(s for s in starts if s > head.start())]
        found[head.group(1)] = set(re.findall(r"`(\w+\.py)`", body))
    return found


def modules(folder: str) -> set[str]:
    """The modules in one folder of the product, `__init__.py` left out."""
    return {p.name for p in (REPO / folder).glob("*.py") if p.name != "__init__.py"}


FOLDERS = sorted(
    {"zeroscaler", "controller", "webhook", "certs"}
    | {
        f"zeroscaler/{p.name}"
        for p in (REPO / "zeroscaler").iterdir()
        if p.is_dir() and not p.is_symlink() and (p / "__init__.py").exists()
    }
)
# The development folders the tests, benchmarks and demo build on, and the benchmarks; the other
# programs on top are mapped by their table in the page, not module by module.
DEV_FOLDERS = ["testkit", "testkit/programs", "bench", "chaos", "oci"]


def test_every_folder_of_the_package_has_a_section() -> None:
    assert set(FOLDERS) | set(DEV_FOLDERS) <= set(sections())


@pytest.mark.parametrize("folder", FOLDERS + DEV_FOLDERS)
def test_the_map_names_each_module_of_a_folder_and_no_other(folder: str) -> None:
    named = sections().get(folder, set())
    assert modules(folder) - named == set(), "missing from docs/architecture.md"
    assert named - modules(folder) - {"__init__.py"} == set(), "named but not in the folder"


@pytest.mark.parametrize("folder", ["controller", "webhook", "certs"])
def test_a_folder_at_the_top_is_refused_by_its_bare_name(folder: str) -> None:
    with pytest.raises(ImportError, match=f"imported as zeroscaler.{folder}"):
        importlib.import_module(folder)
    assert importlib.import_module(f"zeroscaler.{folder}").__name__ == f"zeroscaler.{folder}"
