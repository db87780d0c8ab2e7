"""The loopback-only network namespace the tests and the demo run in."""

from __future__ import annotations

import subprocess
import sys

from localcluster import netns

PROBE = "from localcluster import netns; print(netns.in_isolation())"


def test_a_command_wrapped_for_isolation_sees_only_loopback() -> None:
    argv = netns.isolated_argv([sys.executable, "-c", PROBE])
    assert argv is not None, "this machine cannot make a network namespace (needs root and unshare)"
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


HEADER = "Inter-|   Receive  |  Transmit\n face |bytes    packets|bytes    packets\n"


def test_interfaces_are_read_from_proc_net_dev() -> None:
    text = HEADER + "    lo:  0 0 0\n  eth0: 12 3 0\n"
    assert netns.interfaces(text) == ["lo", "eth0"]
    assert netns.interfaces(HEADER + "    lo:  0 0 0\n") == ["lo"]
