"""The `zeroscaler` command (also `kubectl zeroscaler`): a small dispatch table of subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from zeroscaler.certs.command import add_certs
from zeroscaler.cli.control import add_sleep, add_wake
from zeroscaler.cli.explain import add_explain
from zeroscaler.cli.status import add_status
from zeroscaler.controller.uninstall import add_uninstall

# Each subcommand registers its parser; the parser's `func` runs it.
SUBCOMMANDS: Mapping[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "status": add_status,
    "explain": add_explain,
    "sleep": add_sleep,
    "wake": add_wake,
    "certs": add_certs,
    "uninstall": add_uninstall,
}


def program_name(argv0: str) -> str:
    """`kubectl zeroscaler` when run as the kubectl plugin, else `zeroscaler`."""
    return "kubectl zeroscaler" if os.path.basename(argv0).startswith("kubectl-") else "zeroscaler"


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point for `zeroscaler` and `kubectl-zeroscaler`."""
    parser = argparse.ArgumentParser(prog=program_name(sys.argv[0]), description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for register in SUBCOMMANDS.values():
        register(sub)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result
