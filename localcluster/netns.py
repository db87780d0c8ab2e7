"""Run a command in a network namespace with only loopback: no stray dial can leave the machine."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

REQUIRE_ENV = "ZEROSCALER_REQUIRE_NETNS"
# A second address on the namespace's loopback interface, for the real node: the API server refuses
# loopback addresses in EndpointSlices, so host-network pods on 127.0.0.1 could never be a Service's
# endpoints. A documentation address (TEST-NET-1, RFC 5737) on `lo` routes nowhere else.
NODE_ADDRESS = "192.0.2.10"
_INNER = f'ip link set lo up && ip addr add {NODE_ADDRESS}/32 dev lo && exec "$@"'


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


def has_node_address() -> bool:
    """Whether NODE_ADDRESS is this namespace's own (only inside the isolation made here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((NODE_ADDRESS, 0))
        except OSError:
            return False
    return True


def in_isolation() -> bool:
    """Whether this process already runs in a namespace with no interface but loopback."""
    try:  # /proc/self/net follows this process's namespace; /sys/class/net may not be remounted
        return interfaces(Path("/proc/self/net/dev").read_text()) == ["lo"]
    except OSError:
        return False


def interfaces(proc_net_dev: str) -> list[str]:
    """Interface names in the text of /proc/net/dev (two header lines, then `name: counters`)."""
    return [line.split(":", 1)[0].strip() for line in proc_net_dev.splitlines()[2:] if ":" in line]


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
