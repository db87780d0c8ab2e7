"""The `zeroscaler` command (also `kubectl zeroscaler`): a small dispatch table of subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata

from zeroscaler import DISTRIBUTION
from zeroscaler.cli.check import add_check
from zeroscaler.cli.control import add_pause, add_resume, add_sleep, add_wake, check_selection
from zeroscaler.cli.explain import add_explain
from zeroscaler.cli.session import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    option,
    parse_target,
)
from zeroscaler.cli.status import add_status
from zeroscaler.controller.uninstall import add_uninstall

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
DIST = DISTRIBUTION
SHELLS = ("bash", "zsh", "fish")
SERVER_EXTRA = f"{DIST}[server]"
CONNECTION = ("kubeconfig", "context", "namespace")
EXIT_CODES = f"""\
exit codes (the same for every command):
  {EXIT_OK}    done, or nothing to do
  {EXIT_FAILED}    not done: no kubeconfig, cluster unreachable, access denied, no such
       workload, or refused (paused, not managed); one line on stderr says which
  {EXIT_USAGE}    the command line is wrong (nothing was asked of the cluster)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)

--kubeconfig, --context and -n/--namespace go before or after the subcommand."""


def add_certs_or_placeholder(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`zeroscaler certs` with the server extra (cryptography) installed; else what to install."""
    try:
        from zeroscaler.certs.command import add_certs  # needs cryptography
    except ImportError:
        parser = sub.add_parser(
            "certs", help=f"issue the webhook certificate (needs {SERVER_EXTRA})"
        )
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(func=_needs_server)
        return
    add_certs(sub)


def _needs_server(args: argparse.Namespace) -> int:
    print(
        "zeroscaler certs: this installation has the command line only; "
        f"certificates need the server components' dependencies: pip install '{SERVER_EXTRA}'",
        file=sys.stderr,
    )
    return EXIT_FAILED


def add_completion(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler completion SHELL`."""
    parser = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script: `source <(zeroscaler completion bash)`, "
        '`zeroscaler completion zsh > "${fpath[1]}/_zeroscaler"`, '
        "`zeroscaler completion fish > ~/.config/fish/completions/zeroscaler.fish`.",
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=None)  # main prints it: the script is made from the whole parser


# Each subcommand registers its parser; the parser's `func` runs it.
SUBCOMMANDS: Mapping[str, Register] = {
    "status": add_status,
    "explain": add_explain,
    "sleep": add_sleep,
    "wake": add_wake,
    "pause": add_pause,
    "resume": add_resume,
    "completion": add_completion,
    "certs": add_certs_or_placeholder,
    "uninstall": add_uninstall,
    "check": add_check,
}


def program_name(argv0: str) -> str:
    """`kubectl zeroscaler` when run as the kubectl plugin, else `zeroscaler`."""
    return "kubectl zeroscaler" if os.path.basename(argv0).startswith("kubectl-") else "zeroscaler"


def version() -> str:
    """The installed distribution's version, or `unknown` when run from a bare checkout."""
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser(prog: str = "zeroscaler") -> argparse.ArgumentParser:
    """The whole command line: global flags, then one subparser per SUBCOMMANDS entry."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="See, explain, put to sleep and wake the workloads zeroscaler manages.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    # Before the subcommand these land under their own names (global_*), so that a subcommand's
    # own default cannot hide them; merge_connection decides.
    parser.add_argument(
        "--kubeconfig", dest="global_kubeconfig", metavar="FILE", help="kubeconfig file"
    )
    parser.add_argument("--context", dest="global_context", metavar="NAME", help="its context")
    parser.add_argument(
        "-n", "--namespace", dest="global_namespace", metavar="NAMESPACE", help="namespace"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in SUBCOMMANDS.values():
        register(sub)
    return parser


def merge_connection(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Give the subcommand the connection flags written before it; refuse those it does not take."""
    sub = subparser(parser, str(args.command))
    for name in CONNECTION:
        given = getattr(args, f"global_{name}")
        delattr(args, f"global_{name}")
        if given is None:
            continue
        takes = any(a.dest == name for a in sub._actions)
        if not takes:
            raise UsageError(f"--{name} is not an option of this command")
        # After the subcommand wins; a subcommand's own default (certs: -n zeroscaler) does not.
        if getattr(args, name, None) in (None, sub.get_default(name)):
            setattr(args, name, given)


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[command]
            return found
    raise LookupError(command)


def check_arguments(args: argparse.Namespace) -> None:
    """What argparse cannot see, checked before connecting: the workload's form, -n with -A."""
    if getattr(args, "workload", None) is not None:
        parse_target(args.workload, option(args, "namespace"), args.kind)
    if getattr(args, "all_namespaces", False) and option(args, "namespace"):
        raise UsageError("-n/--namespace and -A/--all-namespaces: give one")
    if hasattr(args, "selector"):  # sleep, wake, pause, resume: one WORKLOAD or a selection
        check_selection(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point for `zeroscaler` and `kubectl-zeroscaler`."""
    parser = build_parser(program_name(sys.argv[0]))
    args = parser.parse_args(argv)
    try:
        merge_connection(args, parser)
        check_arguments(args)
    except UsageError as e:
        print(f"{parser.prog} {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "completion":
        import shtab  # only this command needs it

        print(shtab.complete(parser, shell=args.shell))
        return EXIT_OK
    result: int = args.func(args)
    return result
