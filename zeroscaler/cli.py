"""The `zeroscaler` command: a small dispatch table of subcommands."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from certs.command import add_certs
from controller.uninstall import add_uninstall
from zeroscaler.access import load_access
from zeroscaler.core.annotations import NAMESPACE_ENABLED_LABEL, read_config, read_status
from zeroscaler.core.durations import format_duration
from zeroscaler.kube import Kube, KubeError

Obj = dict[str, Any]
COLUMNS = (
    "NAMESPACE",
    "NAME",
    "KIND",
    "STATE",
    "REPLICAS",
    "IDLE FOR",
    "TIMEOUT",
    "WATCHED KINDS",
    "LAST WAKE REASON",
)
WAKE_REASON = "Woken"


@dataclass(frozen=True, slots=True)
class Row:
    """One managed workload as `zeroscaler status` shows it."""

    namespace: str
    name: str
    kind: str
    state: str
    replicas: str
    idle_for: str
    timeout: str
    watched: str
    last_wake: str

    def cells(self) -> tuple[str, ...]:
        return (
            self.namespace,
            self.name,
            self.kind,
            self.state,
            self.replicas,
            self.idle_for,
            self.timeout,
            self.watched,
            self.last_wake,
        )


def status_rows(
    workloads: Iterable[Obj], opted_in: set[str], wake_events: Iterable[Obj], now: datetime
) -> list[Row]:
    """The table rows for workloads in opted-in namespaces that zeroscaler manages or slept."""
    last_wake: dict[str, tuple[str, str]] = {}
    for event in wake_events:
        uid = str((event.get("involvedObject") or {}).get("uid", ""))
        when = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        message = str(event.get("message", "")).rsplit(": scaled from", 1)[0]
        if uid and when >= last_wake.get(uid, ("", ""))[0]:
            last_wake[uid] = (when, message)
    rows = []
    for obj in workloads:
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        config, _ = read_config(annotations)
        status, _ = read_status(annotations)
        managed = (
            meta.get("namespace") in opted_in
            and not config.opted_out
            and config.idle_timeout is not None
            and config.has_kinds
        )
        if not managed and status.state is None:
            continue
        replicas = int((obj.get("spec") or {}).get("replicas") or 0)
        shown = f"0 (wakes to {status.restore_replicas})" if status.state == "asleep" else ""
        since = status.last_activity
        rows.append(
            Row(
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                kind=str(obj.get("kind", "")),
                state=(status.state or "awake") if managed else "unmanaged",
                replicas=shown or str(replicas),
                idle_for=format_duration((now - since).total_seconds()) if since else "-",
                timeout=format_duration(config.idle_timeout) if config.idle_timeout else "-",
                watched=", ".join(str(r) for r in (*config.watched, *config.owned)) or "-",
                last_wake=last_wake.get(str(meta.get("uid", "")), ("", "-"))[1],
            )
        )
    return sorted(rows, key=lambda r: (r.namespace, r.name, r.kind))


def format_table(rows: Sequence[Row]) -> str:
    """Left-aligned columns separated by two spaces, as kubectl prints them."""
    table = [COLUMNS, *(r.cells() for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


async def _fetch_status(kubeconfig: str | None, namespace: str | None) -> list[Row]:
    async with Kube(load_access(kubeconfig)) as kube:
        where = f"/namespaces/{namespace}" if namespace else ""
        workloads: list[Obj] = []
        for kind, resource in (("Deployment", "deployments"), ("StatefulSet", "statefulsets")):
            items, _ = await kube.list_all(f"/apis/apps/v1{where}/{resource}")
            workloads.extend({**item, "kind": kind} for item in items)
        namespaces, _ = await kube.list_all(
            "/api/v1/namespaces",
            params={"labelSelector": f"{NAMESPACE_ENABLED_LABEL}=true"},
            metadata_only=True,
        )
        opted_in = {str(n["metadata"]["name"]) for n in namespaces}
        events, _ = await kube.list_all(
            f"/api/v1{where}/events", params={"fieldSelector": f"reason={WAKE_REASON}"}
        )
    return status_rows(workloads, opted_in, events, datetime.now(UTC))


def cmd_status(args: argparse.Namespace) -> int:
    """Print the table of managed workloads."""
    try:
        rows = asyncio.run(_fetch_status(args.kubeconfig, args.namespace))
    except KubeError as e:
        print(f"zeroscaler status: {e}", file=sys.stderr)
        return 1
    print(format_table(rows))
    return 0


def _add_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("status", help="show the workloads zeroscaler manages")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, ~/.kube)")
    parser.add_argument("-n", "--namespace", help="only this namespace")
    parser.set_defaults(func=cmd_status)


# Each subcommand registers its parser; the parser's `func` runs it.
SUBCOMMANDS: Mapping[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "status": _add_status,
    "certs": add_certs,
    "uninstall": add_uninstall,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point for `zeroscaler`."""
    parser = argparse.ArgumentParser(prog="zeroscaler", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for register in SUBCOMMANDS.values():
        register(sub)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result
