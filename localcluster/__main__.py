"""`python -m localcluster build | tools | promql-check | flux-apply | up | down`, and
`python -m localcluster isolate -- CMD`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from localcluster import build, cluster, netns


def _say(message: str) -> None:
    print(f"[localcluster] {message}", file=sys.stderr, flush=True)


def _state_file() -> Path:
    return build.cache_root() / "run" / "cluster.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "build",
        help="build or reuse the control-plane binaries and node parts; print their directory",
    )
    sub.add_parser("tools", help="build or reuse crane and the registry (release, push, tests)")
    sub.add_parser(
        "promql-check",
        help="build or reuse promql-check (the chart tests check rules and PromQL with it)",
    )
    sub.add_parser(
        "flux-apply", help="build or reuse flux-apply (Flux's server-side apply, for the tests)"
    )
    up = sub.add_parser("up", help="start a control plane in the background; print its kubeconfig")
    up.add_argument("--nodes", type=int, default=2, help="kwok nodes")
    up.add_argument(
        "--no-real-node", action="store_true", help="no real kubelet beside the kwok nodes"
    )
    sub.add_parser("down", help="stop the control plane started by `up`")
    iso = sub.add_parser("isolate", help="run a command in a loopback-only network namespace")
    iso.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if args.command == "build":
        try:
            binaries = build.ensure_binaries(progress=_say, node=True)
        except build.BuildError as e:
            _say(f"build failed: {e}")
            return 1
        print(Path(binaries["kube-apiserver"]).parent)
        return 0
    if args.command == "tools":
        for name, path in sorted(build.ensure_release_tools(progress=_say).items()):
            print(f"{name}\t{path}")
        return 0
    if args.command == "promql-check":
        print(build.ensure_promql_check(progress=_say))
        return 0
    if args.command == "flux-apply":
        print(build.ensure_flux_apply(progress=_say))
        return 0
    if args.command == "isolate":
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("isolate needs a command")
        netns.exec_isolated(cmd)
        return 0  # not reached: exec replaced us
    if args.command == "up":
        return _up(args.nodes, not args.no_real_node)
    return _down()


def _up(nodes: int, real_node: bool) -> int:
    state_file = _state_file()
    if state_file.exists():
        old = cluster.Cluster.from_state(json.loads(state_file.read_text()))
        if any(c.alive() for c in old.components):
            _say(f"already running; kubeconfig: {old.kubeconfig}")
            print(old.kubeconfig)
            return 0
    binaries = build.ensure_binaries(progress=_say, node=real_node)
    started = time.monotonic()
    workdir = build.cache_root() / "run" / "cluster"
    if workdir.exists():
        shutil.rmtree(workdir)
    running = cluster.start(
        binaries, workdir=workdir, nodes=nodes, progress=_say, detach=True, real_node=real_node
    )
    state_file.write_text(json.dumps(running.state(), indent=2))
    _say(f"up in {time.monotonic() - started:.1f}s; stop it with `make cluster-down`")
    print(running.kubeconfig)
    return 0


def _down() -> int:
    state_file = _state_file()
    if not state_file.exists():
        _say("no cluster is running")
        return 0
    running = cluster.Cluster.from_state(json.loads(state_file.read_text()))
    running.owns_workdir = True
    running.stop()
    state_file.unlink()
    _say("stopped")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
