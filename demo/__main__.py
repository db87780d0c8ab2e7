"""`make demo`: a real kopf operator that zeroscaler puts to sleep, and a Backup that wakes it.

A local Kubernetes on loopback with a real node (containerd and a kubelet): zeroscaler is
`helm install`ed from its chart and image, the example operator (examples/backup-operator) applied
from its plain manifests and image. Without root there is no real node: the same story runs on kwok
nodes with the operator as a local process. Options make it short and machine-readable for tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from demo import story, timeline
from localcluster import build
from localcluster.cluster import start

# Build output, like the images: a run leaves the working tree clean. The README's picture,
# docs/demo-timeline.png, is refreshed only when asked (`--timeline docs/demo-timeline.png`).
TIMELINE = story.ROOT / "dist" / "demo-timeline.png"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="8 s idle timeout and one wake")
    parser.add_argument("--idle-timeout", type=int, help="seconds (default 15, --quick 8)")
    parser.add_argument("--wakes", type=int, help="times a Backup wakes it (default 2, --quick 1)")
    parser.add_argument(
        "--kwok", action="store_true", help="kwok nodes only, as where the real node cannot run"
    )
    parser.add_argument("--summary-json", type=Path, help="also write the summary here")
    parser.add_argument(
        "--timeline",
        type=Path,
        help=f"the PNG to write (default {TIMELINE.relative_to(story.ROOT)}; --quick: none)",
    )
    args = parser.parse_args(argv)
    opts = story.Options(
        idle_timeout=args.idle_timeout or (8 if args.quick else 15),
        wakes=args.wakes or (1 if args.quick else 2),
    )
    png = args.timeline or (None if args.quick else TIMELINE)

    def say(message: str) -> None:
        print(message, flush=True)

    binaries = build.ensure_binaries(progress=lambda m: say(f"[build] {m}"), node=not args.kwok)
    work = Path(tempfile.mkdtemp(prefix="zeroscaler-demo-"))
    story.step(say, "a local Kubernetes on 127.0.0.1: control plane, a kwok node, a real node")
    real = not args.kwok
    cluster = start(binaries, nodes=1, progress=lambda m: say(f"   {m}"), real_node=real)
    if args.kwok:
        cluster.real_node_absent = "--kwok asks for kwok nodes only"
    try:
        summary = story.run(cluster, work, opts, say)
    finally:
        story.step(say, "stopping everything the demo started")
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(summary, say)
    if png is not None:
        title = f"make demo ({summary['mode']}): the backup operator's replicas and pods"
        png.parent.mkdir(parents=True, exist_ok=True)
        timeline.plot(summary["samples"], summary["marks"], png, title)
        say(f"timeline: {png}")
    if args.summary_json:
        args.summary_json.write_text(json.dumps(public(summary), indent=2) + "\n")
    return 0


def public(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without the raw samples."""
    return {k: v for k, v in summary.items() if k not in ("samples", "marks")}


def report(summary: dict[str, Any], say: story.Say) -> None:
    """The summary table: one row a wake, the split of create-to-reconciled, and the medians."""
    story.step(say, f"summary ({summary['mode']})")
    say(f"   slept after the {summary['idle_timeout_s']}s idle timeout: {summary['slept']}")
    head = f"   {'Backup':<22}{'decision':>9}{'pod start':>10}{'operator':>9}{'total':>8}  by"
    say(head)
    for w in summary["wakes"]:
        say(
            f"   {w['backup']:<22}{w['wake_decision_s']:>8.2f}s{w['pod_start_s']:>9.2f}s"
            f"{w['operator_start_s']:>8.2f}s{w['create_to_reconciled_s']:>7.2f}s  "
            f"{w['reconciled_by']}"
        )
    p = summary["p50"]
    say(
        f"   {'p50':<22}{p['wake_decision_s']:>8.2f}s{p['pod_start_s']:>9.2f}s"
        f"{p['operator_start_s']:>8.2f}s{p['create_to_reconciled_s']:>7.2f}s"
    )
    say(f"   woke on: {summary['wakes'][0]['woke_on']}" if summary["wakes"] else "   no wakes")
    say(f"   slept again after each wake: {summary['slept_again']}")


if __name__ == "__main__":
    sys.exit(main())
