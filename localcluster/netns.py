"""Run a command in a network namespace with only loopback: no stray dial can leave the machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

REQUIRE_ENV = "ZEROSCALER_REQUIRE_NETNS"
_INNER = 'ip link set lo up && exec "$@"'


def isolated_argv(argv: list[str]) -> list[str] | None:
    """The command wrapped in `unshare --net`, or None where this machine cannot do that."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        return None
    probe = subprocess.run(
        [unshare, "--net", "--", ip, "link", "set", "lo", "up"], capture_output=True
    )
    if probe.returncode != 0:
        return None
    return [unshare, "--net", "--", "sh", "-c", _INNER, "sh", *argv]


def in_isolation() -> bool:
    """Whether this process already runs in a namespace with no interface but loopback."""
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return False
    return names == ["lo"]


def exec_isolated(argv: list[str]) -> None:
    """Replace this process by `argv`, inside a loopback-only network namespace when possible."""
    if in_isolation():
        os.execvp(argv[0], argv)
    wrapped = isolated_argv(argv)
    if wrapped is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            sys.exit(
                f"{REQUIRE_ENV}=1 but a loopback-only network namespace cannot be made here "
                "(needs root or user namespaces, plus unshare and ip)"
            )
        print(
            "warning: cannot make a loopback-only network namespace here; running unisolated",
            file=sys.stderr,
        )
        os.execvp(argv[0], argv)
    os.execvp(wrapped[0], wrapped)
