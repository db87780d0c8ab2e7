"""What `pip install .` gives a user: one import package, and console scripts that start.

Run by `make package-check` with the fresh virtualenv's interpreter, as a script, so that the
checkout is not on sys.path and every import below comes from what pip installed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from importlib import metadata
from importlib.util import find_spec
from pathlib import PurePosixPath

DIST = "zeroscaler"
BARE_NAMES = ("controller", "webhook", "certs", "localcluster", "image", "bench", "demo", "tests")


def top_level_packages() -> set[str]:
    """The first path part of every installed file that lives in site-packages."""
    files = metadata.files(DIST) or []
    tops = {PurePosixPath(str(f)).parts[0] for f in files}
    return {t for t in tops if t != ".." and not t.endswith((".dist-info", ".pth"))}


def main() -> int:
    failures: list[str] = []
    tops = top_level_packages()
    if tops != {DIST}:
        failures.append(f"the wheel installs top-level {sorted(tops)}, expected only [{DIST!r}]")
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
        for entry in scripts:
            proc = subprocess.run(
                [str(bin_dir / entry.name), "--help"], cwd=cwd, capture_output=True, text=True
            )
            if proc.returncode != 0:
                tail = proc.stderr[-400:]
                failures.append(f"{entry.name} --help exited {proc.returncode}: {tail}")
        uninstall = subprocess.run(
            [str(bin_dir / "zeroscaler"), "uninstall", "--help"], cwd=cwd, capture_output=True
        )
        if uninstall.returncode != 0:
            failures.append(f"zeroscaler uninstall --help exited {uninstall.returncode}")
    license_expression = metadata.metadata(DIST)["License-Expression"]
    if license_expression != "Apache-2.0":
        failures.append(f"License-Expression is {license_expression!r}, expected 'Apache-2.0'")
    for failure in failures:
        print(f"package-check: {failure}", file=sys.stderr)
    if not failures:
        names = ", ".join(sorted(e.name for e in scripts))
        print(f"package-check: one import package ({DIST}); {len(scripts)} scripts start: {names}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
