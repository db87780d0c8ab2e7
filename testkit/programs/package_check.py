"""What `pip install .` gives a user: one import package, and console scripts that start.

Run by `make package-check` with the fresh virtualenv's interpreter, as a script, so that the
checkout is not on sys.path and every import below comes from what pip installed: `server` after
`pip install '.[server]'` (every script runs), `cli` after `pip install .` (the command runs; the
server scripts and `zeroscaler certs` name the extra they need).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from importlib import metadata
from importlib.util import find_spec
from pathlib import PurePosixPath

DIST = "kube-zeroscaler"
PACKAGE = "zeroscaler"
BARE_NAMES = ("controller", "webhook", "certs", "localcluster", "image", "bench", "demo", "tests")
SERVER_ONLY = ("fastapi", "uvicorn", "cryptography", "jsonpatch", "prometheus_client")
SERVER_SCRIPTS = ("zeroscaler-webhook", "zeroscaler-controller", "zeroscaler-combined")
EXTRA = "kube-zeroscaler[server]"
# Commands a command-line-only install must run, and must exit 0.
CLI_RUNS = (
    ("--version",),
    ("status", "--help"),
    ("--context", "x", "wake", "--help"),
    ("uninstall", "--help"),
    ("completion", "bash"),
)


def top_level_packages() -> set[str]:
    """The first path part of every installed file that lives in site-packages."""
    files = metadata.files(DIST) or []
    tops = {PurePosixPath(str(f)).parts[0] for f in files}
    return {t for t in tops if t != ".." and not t.endswith((".dist-info", ".pth"))}


def run(bin_dir: PurePosixPath, cwd: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True
    )


def check_cli_only(bin_dir: PurePosixPath, cwd: str) -> list[str]:
    """Without the server extra: the command works, and what needs the extra says so."""
    failures = [f"{m} is installed without {EXTRA}" for m in SERVER_ONLY if find_spec(m)]
    for argv in CLI_RUNS:
        proc = run(bin_dir, cwd, "zeroscaler", *argv)
        if proc.returncode != 0:
            failures.append(
                f"zeroscaler {' '.join(argv)} exited {proc.returncode}: {proc.stderr[-400:]}"
            )
        elif argv == ("--version",) and proc.stdout.split() != [
            "zeroscaler",
            metadata.version(DIST),
        ]:
            failures.append(f"zeroscaler --version said {proc.stdout.strip()!r}")
    for argv in (("zeroscaler", "certs"), *((s, "--help") for s in SERVER_SCRIPTS)):
        proc = run(bin_dir, cwd, *argv)
        if proc.returncode != 1 or EXTRA not in proc.stderr or "Traceback" in proc.stderr:
            failures.append(
                f"{' '.join(argv)} without {EXTRA}: exit {proc.returncode}: {proc.stderr[-400:]}"
            )
    return failures


def check_scripts(
    bin_dir: PurePosixPath, cwd: str, scripts: list[metadata.EntryPoint]
) -> list[str]:
    """With the server extra: every console script starts."""
    failures = []
    for entry in scripts:
        proc = run(bin_dir, cwd, entry.name, "--help")
        if proc.returncode != 0:
            failures.append(f"{entry.name} --help exited {proc.returncode}: {proc.stderr[-400:]}")
    uninstall = run(bin_dir, cwd, "zeroscaler", "uninstall", "--help")
    if uninstall.returncode != 0:
        failures.append(f"zeroscaler uninstall --help exited {uninstall.returncode}")
    return failures


def main(mode: str) -> int:
    failures: list[str] = []
    tops = top_level_packages()
    if tops != {PACKAGE}:
        failures.append(f"the wheel installs top-level {sorted(tops)}, expected only [{PACKAGE!r}]")
    for name in BARE_NAMES:
        if find_spec(name) is not None:
            failures.append(f"`import {name}` works in the installed environment")
    scripts = [
        e for e in metadata.entry_points(group="console_scripts") if e.dist and e.dist.name == DIST
    ]
    if not scripts:
        failures.append("no console scripts are installed")
    bin_dir = PurePosixPath(sys.executable).parent
    with tempfile.TemporaryDirectory() as cwd:  # not the checkout: imports come from site-packages
        if mode == "cli":
            failures += check_cli_only(bin_dir, cwd)
        else:
            failures += check_scripts(bin_dir, cwd, scripts)
    license_expression = metadata.metadata(DIST)["License-Expression"]
    if license_expression != "Apache-2.0":
        failures.append(f"License-Expression is {license_expression!r}, expected 'Apache-2.0'")
    for failure in failures:
        print(f"package-check: {failure}", file=sys.stderr)
    if not failures:
        names = ", ".join(sorted(e.name for e in scripts))
        if mode == "cli":
            said = ", ".join(SERVER_SCRIPTS)
            print(f"package-check: without {EXTRA}, zeroscaler runs; certs, {said} name the extra")
        else:
            print(
                f"package-check: one import package ({PACKAGE}); "
                f"{len(scripts)} scripts start: {names}"
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "server"))
