"""The loopback-only network namespace the tests and the demo run in."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from localcluster import netns

PROBE = "from localcluster import netns; print(netns.in_isolation())"


def test_a_command_wrapped_for_isolation_sees_only_loopback() -> None:
    argv = netns.isolated_argv([sys.executable, "-c", PROBE])
    if argv is None:
        # Where the system tests must be isolated, a machine that cannot isolate is a failure.
        assert os.environ.get(netns.REQUIRE_ENV) != "1", "cannot make a network namespace here"
        pytest.skip("this machine cannot make a network namespace (needs root or user namespaces)")
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


HEADER = "Inter-|   Receive  |  Transmit\n face |bytes    packets|bytes    packets\n"


def test_interfaces_are_read_from_proc_net_dev() -> None:
    text = HEADER + "    lo:  0 0 0\n  eth0: 12 3 0\n"
    assert netns.interfaces(text) == ["lo", "eth0"]
    assert netns.interfaces(HEADER + "    lo:  0 0 0\n") == ["lo"]
