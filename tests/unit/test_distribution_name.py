"""Every install instruction in the repository names our distribution, never another project's.

`zeroscaler` on the package index belongs to an unrelated project, so a `pip install zeroscaler`
anywhere (a doc, NOTES.txt, the krew launcher, an error message) would fetch someone else's code.
Each `pip install`, `pipx install`, `pipx run --spec`, `uv tool install` and `uv pip install` in a
tracked text file must install `kube-zeroscaler` (any extras, any version), a local path (`.`,
`'.[server]'`, `-e`), or a requirements file; the SBOM's package URL names it too.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from zeroscaler import DISTRIBUTION

REPO = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".md", ".txt", ".py", ".yaml", ".yml", ".toml", ".tpl", ".json", ".sh", ".in"}
TEXT_NAMES = {"Makefile", "Dockerfile", "run", "NOTES.txt"}
# An install command, up to the end of its line, a quote that closes it, or a backtick.
INSTALL = re.compile(
    r"\b(?:pip3?|python3?\s+-m\s+pip|pipx|uv(?:\s+pip|\s+tool)?)\s+(install|run)\b([^\n`]*)"
)
# Tools of the build itself, installed by name where the repository sets up its own environment.
BUILD_TOOLS = {"pip"}
# Words after `install` that are options, some taking a value.
TAKES_VALUE = {"--target", "-t", "--index-url", "-i", "--python", "--prefix", "--root", "-c"}
LOCAL = re.compile(r"^(\.|\./|/|\$|\{|-e|\.\[|\.\w*/)")


def tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        REPO / n
        for n in names
        if (Path(n).suffix in TEXT_SUFFIXES or Path(n).name in TEXT_NAMES)
        and not n.startswith("bench/results/")
        and REPO / n != Path(__file__).resolve()  # its examples of wrong names are on purpose
        and (REPO / n).is_file()
    ]


def named_distributions(command: str, rest: str) -> list[str]:
    """The requirement names an install command line asks for (not paths, files or options)."""
    try:
        words = shlex.split(rest, comments=False)
    except ValueError:
        words = rest.split()
    names: list[str] = []
    skip = False
    spec_next = False
    for word in words:
        word = word.strip("'\"(),;")
        if skip:
            skip = False
            continue
        if spec_next:
            spec_next = False
            names.append(word)
            continue
        if word in TAKES_VALUE or word in ("-r", "--requirement"):
            skip = True
            continue
        if word == "--spec":
            spec_next = True
            continue
        if word in ("&&", "|", "#", "\\"):
            break
        if not word or word.startswith("-"):
            continue
        # The first word that is no option is what is installed; prose or a command follows it.
        if not LOCAL.match(word) and not names:
            names.append(word)
        break
    return names


def requirement_name(spec: str) -> str:
    """The distribution a requirement or a wheel's or sdist's file names."""
    if "/" in spec or spec.endswith((".whl", ".tar.gz", ".zip")):
        spec = spec.rsplit("/", 1)[-1].split("-", 1)[0]  # name-version-...: the file's name part
    return re.split(r"[\[=<>!~ ;@]", spec, maxsplit=1)[0].lower().replace("_", "-")


def install_instructions() -> list[tuple[str, str]]:
    found = []
    for path in tracked_text_files():
        text = path.read_text(errors="replace")
        for m in INSTALL.finditer(text):
            for name in named_distributions(m.group(1), m.group(2)):
                line = text.count("\n", 0, m.start()) + 1
                found.append((f"{path.relative_to(REPO)}:{line}", name))
    return found


def test_the_distribution_name_is_ours_and_pyprojects() -> None:
    assert DISTRIBUTION == "kube-zeroscaler"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(rf'^name = "{DISTRIBUTION}"', pyproject, re.M)


def test_every_install_instruction_names_our_distribution() -> None:
    found = install_instructions()
    assert len(found) >= 5, "the scan found too few instructions to be looking at the right files"
    wrong = [
        f"{where}: installs {name!r}"
        for where, name in found
        if requirement_name(name) not in {DISTRIBUTION, *BUILD_TOOLS}
    ]
    assert not wrong, "install instructions naming another distribution:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("pipx install zeroscaler", ["zeroscaler"]),
        ("pip install 'zeroscaler[server]'", ["zeroscaler[server]"]),
        ('pipx run --spec "zeroscaler==1.0" zeroscaler status', ["zeroscaler==1.0"]),
        ("python -m pip install --quiet -e '.[dev]'", []),
        ("pip install --target /x -r image/requirements.lock", []),
        ("uv tool install kube-zeroscaler", ["kube-zeroscaler"]),
        ("pip install .", []),
        ("pipx install dist/zeroscaler-0.1.5.tar.gz", ["dist/zeroscaler-0.1.5.tar.gz"]),
    ],
)
def test_the_scan_reads_each_form_of_instruction(line: str, names: list[str]) -> None:
    [m] = INSTALL.finditer(line)
    assert named_distributions(m.group(1), m.group(2)) == names
    if names:
        assert requirement_name(names[0]) in {"zeroscaler", "kube-zeroscaler"}


def test_the_wrong_name_would_be_found(tmp_path: Path) -> None:
    text = "Install it: `pipx install zeroscaler==0.1.0`, then run it."
    [m] = INSTALL.finditer(text)
    [name] = named_distributions(m.group(1), m.group(2))
    assert requirement_name(name) == "zeroscaler" != DISTRIBUTION
