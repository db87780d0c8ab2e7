"""`zeroscaler status`: the workloads zeroscaler manages, in a table, JSON or YAML."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import yaml

from zeroscaler.api import Gone, NotFound, Obj
from zeroscaler.cli.session import (
    Failure,
    Session,
    UsageError,
    add_connection,
    add_namespace,
    option,
    run,
)
from zeroscaler.cli.workload_view import WakeInspector, WorkloadView, read_view
from zeroscaler.core.annotations import NAMESPACE_ENABLED_LABEL
from zeroscaler.core.decision import wake_replicas
from zeroscaler.core.durations import format_duration, format_time
from zeroscaler.core.savings import NONE, Requests, format_cpu, format_memory, pod_requests
from zeroscaler.core.workloads import WORKLOAD_RESOURCES, workload_path

# The Events that say why a workload last woke: the controller's, someone else's, a person's.
WAKE_REASONS = ("Woken", "WokenExternally", "ManualWake")
COLUMNS = (
    ("NAMESPACE", "namespace"),
    ("NAME", "name"),
    ("KIND", "kind"),
    ("STATE", "state"),
    ("REPLICAS", "replicas"),
    ("RESTORE", "restore"),
    ("IDLE FOR", "idle_for"),
    ("SAVED", "saved"),
    ("RELEASED", "released"),
    ("TIMEOUT", "timeout"),
    ("FLAGS", "flags"),
    ("LAST WAKE REASON", "last_wake"),
)
WIDE = (
    ("WATCHED KINDS", "watched"),
    ("OWNED KINDS", "owned"),
    ("WATCH NAMESPACES", "watch_namespaces"),
    ("SERVICE ACCOUNT", "service_account"),
    ("SERVES", "serves"),
)


@dataclass(frozen=True, slots=True)
class Row:
    """One workload as the table shows it."""

    namespace: str
    name: str
    kind: str
    state: str
    replicas: str
    restore: str
    idle_for: str
    saved: str
    released: str  # CPU/memory its pods request, given back while asleep
    timeout: str
    flags: str
    last_wake: str
    watched: str = "-"
    owned: str = "-"
    watch_namespaces: str = "-"
    service_account: str = "-"
    serves: str = "-"


def state_of(view: WorkloadView) -> str:
    """awake, asleep, waking (scaled up, not yet recorded), stopped (at 0 by someone else)."""
    if view.unmanaged:
        return "unmanaged"
    if view.status.state == "asleep":
        return "asleep" if view.replicas == 0 else "waking"
    return "awake" if view.replicas > 0 else "stopped"


def flags_of(view: WorkloadView) -> list[str]:
    """Marks beside the state: held by a person, flapping, annotations ignored, never sleeps."""
    flags = []
    if view.paused:
        flags.append("paused")
    if view.flapping:
        flags.append("flapping")
    if view.problems:
        flags.append("invalid-annotations")
    if view.kinds and not any(r.counts and not r.owned for r in view.kinds):
        flags.append("cannot-wake")
    if not view.complete:
        flags.append("partial-view")
    if view.serving is not None and view.serving.keeps_awake:
        flags.append("serves")  # the API server calls it: never put to sleep
    if view.schedule.keep_awake is not None:
        flags.append("keep-awake")  # a window in force (docs/DESIGN.md, Schedules)
    elif view.schedule.forced_sleep is not None:
        flags.append("forced-sleep-hold" if view.schedule.forced_sleep.hold else "forced-sleep")
    return flags


def serves_of(view: WorkloadView) -> list[str]:
    """`ValidatingWebhookConfiguration/x (Service ns/svc)` for each registration it backs."""
    links = view.serving.links if view.serving is not None else ()
    return [f"{link.kind}/{link.name} (Service {'/'.join(link.service)})" for link in links]


def idle_for(view: WorkloadView, now: datetime) -> str:
    """How long it has been idle; `<=` when some of its kinds could not be listed."""
    since = view.idle_since
    if since is None:
        return "-"
    shown = format_duration(max((now - since).total_seconds(), 0.0))
    return shown if view.complete else f"<={shown}"


def saved_seconds(view: WorkloadView, now: datetime) -> float | None:
    """Replica-seconds the current sleep has saved, counted as the controller counts them
    (controller/accounting.py: its remembered replicas, else 1, for each second asleep)."""
    since = view.status.asleep_since
    if state_of(view) != "asleep" or since is None:
        return None
    return max((now - since).total_seconds(), 0.0) * (view.status.restore_replicas or 1)


def template_requests(view: WorkloadView) -> Requests:
    """What one pod of its template requests."""
    template = (view.obj.get("spec") or {}).get("template") or {}
    return pod_requests(template.get("spec") or {})


def released_of(view: WorkloadView) -> Requests | None:
    """The requests a sleeper gives back now: its pods' times the replicas it wakes to."""
    if state_of(view) != "asleep":
        return None
    return template_requests(view).times(view.status.restore_replicas or 1)


def format_released(requests: Requests | None) -> str:
    """`500m/1Gi`: CPU cores and memory given back."""
    if requests is None:
        return "-"
    return f"{format_cpu(requests.cpu)}/{format_memory(requests.memory)}"


def format_saved(seconds: float | None) -> str:
    """Replica-seconds as a duration of replica time: `6h` is six hours of one replica."""
    return format_duration(seconds) if seconds is not None else "-"


def last_wakes(events: Iterable[Obj]) -> dict[str, str]:
    """Each workload's (by uid) newest wake Event message, without its `: scaled from` tail."""
    newest: dict[str, tuple[str, str]] = {}
    for event in events:
        uid = str((event.get("involvedObject") or {}).get("uid", ""))
        when = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        message = str(event.get("message", "")).rsplit(": scaled ", 1)[0]
        if uid and when >= newest.get(uid, ("", ""))[0]:
            newest[uid] = (when, message)
    return {uid: message for uid, (_, message) in newest.items()}


def status_row(view: WorkloadView, wakes: Mapping[str, str], now: datetime) -> Row:
    """The row for one workload."""
    config, status = view.config, view.status
    restore = wake_replicas(config, status) if status.state == "asleep" else None
    namespaces = config.watch_namespaces
    return Row(
        namespace=view.namespace,
        name=view.name,
        kind=view.kind,
        state=state_of(view),
        replicas=str(view.replicas),
        restore=str(restore) if restore is not None else "-",
        idle_for=idle_for(view, now),
        saved=format_saved(saved_seconds(view, now)),
        released=format_released(released_of(view)),
        timeout=format_duration(config.idle_timeout) if config.idle_timeout else "-",
        flags=",".join(flags_of(view)) or "-",
        last_wake=wakes.get(str(view.meta.get("uid", "")), "-"),
        watched=", ".join(map(str, config.watched)) or "-",
        owned=", ".join(map(str, config.owned)) or "-",
        watch_namespaces=", ".join(namespaces) if namespaces else "(from RBAC)",
        service_account=view.service_account,
        serves=", ".join(serves_of(view)) or "-",
    )


def is_shown(view: WorkloadView) -> bool:
    """Managed workloads, and those zeroscaler left a status on (one it slept, say)."""
    return not view.unmanaged or view.status.state is not None


def format_table(rows: Sequence[Row], *, wide: bool = False, namespaces: bool = True) -> str:
    """The status table: COLUMNS, without NAMESPACE in one namespace, WIDE's too if wide."""
    columns = [c for c in COLUMNS if namespaces or c[1] != "namespace"]
    if wide:
        columns += WIDE
    table = [[header for header, _ in columns]]
    table += [[str(getattr(r, attr)) for _, attr in columns] for r in rows]
    return align(table)


def align(table: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by three spaces, as kubectl prints them."""
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def status_item(view: WorkloadView, row: Row, now: datetime) -> dict[str, Any]:
    """One workload for `-o json|yaml`: times in RFC 3339, durations in seconds."""
    since = view.idle_since
    released = released_of(view)
    item: dict[str, Any] = {
        **{
            k: v
            for k, v in asdict(row).items()
            if k not in ("idle_for", "saved", "released", "timeout", "flags")
        },
        "replicas": view.replicas,
        "restore": int(row.restore) if row.restore != "-" else None,
        "idleSince": format_time(since) if since else None,
        "idleSeconds": round((now - since).total_seconds()) if since else None,
        "idleComplete": view.complete,
        "timeoutSeconds": view.config.idle_timeout,
        "savedReplicaSeconds": _rounded(saved_seconds(view, now)),
        "releasedCPUCores": released.cpu if released is not None else None,
        "releasedMemoryBytes": round(released.memory) if released is not None else None,
        "flags": flags_of(view),
        "paused": view.paused,
        "flapping": view.flapping or None,
        "asleepSince": format_time(view.status.asleep_since) if view.status.asleep_since else None,
        "problems": [str(p) for p in view.problems],
        "watched": [str(r) for r in view.config.watched],
        "owned": [str(r) for r in view.config.owned],
        "watch_namespaces": list(view.config.watch_namespaces or ()) or None,  # None: from RBAC
        "serves": _serves_item(view),
        "keptAwake": view.serving.reason() if view.serving and view.serving.keeps_awake else None,
    }
    renamed = {"last_wake": "lastWakeReason", "watch_namespaces": "watchNamespaces"}
    renamed["service_account"] = "serviceAccount"
    return {renamed.get(k, k): (None if v == "-" else v) for k, v in item.items()}


def _serves_item(view: WorkloadView) -> list[dict[str, str]] | None:
    """The registrations it backs; None when they were not looked at."""
    if view.serving is None:
        return None
    return [
        {"kind": link.kind, "name": link.name, "service": "/".join(link.service)}
        for link in view.serving.links
    ]


def _rounded(seconds: float | None) -> int | None:
    return round(seconds) if seconds is not None else None


@dataclass
class Savings:
    """What the sleepers of one namespace (or of all) save now."""

    namespace: str
    managed: int = 0
    asleep: int = 0
    replicas: int = 0  # not running now
    seconds: float = 0.0  # replica-seconds saved by the current sleeps
    released: Requests = NONE  # CPU and memory their pods would request now
    held: Requests = NONE  # core-seconds and byte-seconds not held by the current sleeps

    def add(self, other: Savings) -> None:
        self.managed += other.managed
        self.asleep += other.asleep
        self.replicas += other.replicas
        self.seconds += other.seconds
        self.released += other.released
        self.held += other.held


def summarise(views: Sequence[WorkloadView], now: datetime) -> list[Savings]:
    """A Savings per namespace with a managed workload, sorted; then the total, if more than one."""
    by_ns: dict[str, Savings] = {}
    for view in views:
        if view.unmanaged:
            continue
        entry = by_ns.setdefault(view.namespace, Savings(view.namespace))
        entry.managed += 1
        saved = saved_seconds(view, now)
        if saved is not None:
            entry.asleep += 1
            entry.replicas += view.status.restore_replicas or 1
            entry.seconds += saved
            entry.released += released_of(view) or NONE
            per_pod = template_requests(view)
            entry.held += Requests(per_pod.cpu * saved, per_pod.memory * saved)
    rows = [by_ns[ns] for ns in sorted(by_ns)]
    if len(rows) > 1:
        total = Savings("(all)")
        for r in rows:
            total.add(r)
        rows.append(total)
    return rows


SAVINGS_COLUMNS = (
    "NAMESPACE",
    "MANAGED",
    "ASLEEP",
    "REPLICAS NOT RUNNING",
    "SAVED",
    "CPU RELEASED",
    "MEMORY RELEASED",
)


def render_savings(views: Sequence[WorkloadView], now: datetime, output: str) -> str:
    """`--savings`: per namespace, what the current sleeps save."""
    rows = summarise(views, now)
    if output in ("json", "yaml"):
        doc = {
            "items": [
                {
                    "namespace": r.namespace if r.namespace != "(all)" else None,
                    "managed": r.managed,
                    "asleep": r.asleep,
                    "replicasNotRunning": r.replicas,
                    "savedReplicaSeconds": round(r.seconds),
                    "releasedCPUCores": r.released.cpu,
                    "releasedMemoryBytes": round(r.released.memory),
                    "savedCPUCoreSeconds": round(r.held.cpu),
                    "savedMemoryByteSeconds": round(r.held.memory),
                }
                for r in rows
            ]
        }
        return json.dumps(doc, indent=2) if output == "json" else yaml.safe_dump(doc).rstrip()
    if not rows:
        return "No workloads managed by zeroscaler."
    table = [list(SAVINGS_COLUMNS)]
    table += [
        [
            r.namespace,
            str(r.managed),
            str(r.asleep),
            str(r.replicas),
            format_duration(r.seconds),
            format_cpu(r.released.cpu),
            format_memory(r.released.memory),
        ]
        for r in rows
    ]
    return align(table)


def render(
    views: Sequence[WorkloadView],
    wakes: Mapping[str, str],
    now: datetime,
    output: str,
    all_ns: bool,
) -> str:
    """The whole output in the asked format."""
    shown = sorted((f for f in views if is_shown(f)), key=lambda f: (f.namespace, f.name, f.kind))
    rows = [status_row(f, wakes, now) for f in shown]
    if output in ("json", "yaml"):
        doc = {"items": [status_item(f, r, now) for f, r in zip(shown, rows, strict=True)]}
        if output == "json":
            return json.dumps(doc, indent=2)
        return yaml.safe_dump(doc, sort_keys=False).rstrip()
    if not rows:
        where = "in any namespace" if all_ns else f"in namespace {views_namespace(views)}"
        return f"No workloads managed by zeroscaler {where}."
    return format_table(rows, wide=output == "wide", namespaces=all_ns)


def views_namespace(views: Sequence[WorkloadView]) -> str:
    return views[0].namespace if views else "?"


async def gather(
    session: Session, namespace: str | None
) -> tuple[list[WorkloadView], dict[str, str]]:
    """Read every Deployment and StatefulSet in scope, and what the status shows of each."""
    workloads: list[Obj] = []
    for kind in ("Deployment", "StatefulSet"):
        path = workload_path(kind, namespace) if namespace else f"/apis/apps/v1/{kind.lower()}s"
        workloads += [{**o, "kind": kind} for o in await session.list(path)]
    labels = await namespace_labels(session, namespace)
    views = [read_view(o, labels(str(o["metadata"].get("namespace", "")))) for o in workloads]
    inspector = WakeInspector(session)
    for f in views:
        if not f.unmanaged and f.is_awake:
            await inspector.inspect(f, activity=True)
        if not f.unmanaged:
            await inspector.inspect_serving(f)
    events: list[Obj] = []
    where = f"/namespaces/{namespace}" if namespace else ""
    for reason in WAKE_REASONS:
        path = f"/api/v1{where}/events"
        try:
            events += await session.list(path, params={"fieldSelector": f"reason={reason}"})
        except Failure:
            break  # no Events to read: the column stays empty rather than the command failing
    return views, last_wakes(events)


async def namespace_labels(session: Session, namespace: str | None) -> Any:
    """A function from a namespace's name to its labels (None: gone or unknown)."""
    if namespace is None:
        params = {"labelSelector": f"{NAMESPACE_ENABLED_LABEL}=true"}
        items = await session.list("/api/v1/namespaces", params=params, metadata_only=True)
        enabled = {str(n["metadata"]["name"]) for n in items}
        return lambda name: {NAMESPACE_ENABLED_LABEL: "true"} if name in enabled else {}
    try:
        ns = await session.get(f"/api/v1/namespaces/{namespace}")
    except NotFound:
        raise Failure(f"namespace {namespace} does not exist") from None
    except Failure:  # may read workloads but not their Namespace: opted in or not is unknown
        return lambda _: None
    found = dict((ns.get("metadata") or {}).get("labels") or {})
    return lambda _: found


async def _status(session: Session, args: argparse.Namespace) -> int:
    namespace = (
        None if args.all_namespaces else (option(args, "namespace") or session.access.namespace)
    )
    if args.watch and args.savings:
        raise UsageError("--watch shows workloads as they change; it does not take --savings")
    views, wakes = await gather(session, namespace)
    now = await session.now()
    if args.savings:
        print(render_savings(views, now, args.output))
    else:
        print(render(views, wakes, now, args.output, namespace is None), flush=True)
    if args.watch:
        await watch(session, namespace, args.output)
    return 0


def watched_line(
    view: WorkloadView, wakes: Mapping[str, str], now: datetime, output: str, all_ns: bool
) -> str:
    """One workload that changed, as `--watch` prints it: a table row without its header, or
    one JSON document a line, or a YAML document."""
    row = status_row(view, wakes, now)
    if output == "json":
        return json.dumps(status_item(view, row, now))
    if output == "yaml":
        return "---\n" + yaml.safe_dump(status_item(view, row, now), sort_keys=False).rstrip()
    return format_table([row], wide=output == "wide", namespaces=all_ns).splitlines()[-1]


async def watch(session: Session, namespace: str | None, output: str) -> None:
    """Print each shown workload again whenever it changes, until interrupted."""
    changes: asyncio.Queue[Obj] = asyncio.Queue()
    followers = [
        asyncio.create_task(_follow(session, kind, namespace, changes))
        for kind in WORKLOAD_RESOURCES
    ]
    labels = await namespace_labels(session, namespace)
    try:
        while True:
            obj = await changes.get()
            ns = str(obj["metadata"].get("namespace", ""))
            view = read_view(obj, labels(ns), await session.now())
            if not is_shown(view):
                continue
            inspector = WakeInspector(session)  # afresh: what counts may have changed too
            if not view.unmanaged and view.is_awake:
                await inspector.inspect(view, activity=True)
            if not view.unmanaged:
                await inspector.inspect_serving(view)
            wakes = await _wakes_of(session, ns, str(obj["metadata"].get("uid", "")))
            line = watched_line(view, wakes, await session.now(), output, namespace is None)
            print(line, flush=True)
    finally:
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)


async def _follow(
    session: Session, kind: str, namespace: str | None, changes: asyncio.Queue[Obj]
) -> None:
    """Put every changed Deployment (or StatefulSet) on `changes`; listed again after a 410."""
    path = (
        workload_path(kind, namespace) if namespace else f"/apis/apps/v1/{WORKLOAD_RESOURCES[kind]}"
    )
    version = ""
    while True:
        if not version:
            _, version = await session.call(
                "GET", path, session.kube.list_all(path, metadata_only=True)
            )
        try:
            async for event in session.kube.watch(path, resource_version=version):
                obj = event.get("object") or {}
                found = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                version = found or version
                if event.get("type") in ("ADDED", "MODIFIED"):
                    await changes.put({**obj, "kind": kind})
        except Gone:
            version = ""


async def _wakes_of(session: Session, namespace: str, uid: str) -> dict[str, str]:
    """The newest wake Event's words for one workload."""
    try:
        events = await session.list(
            f"/api/v1/namespaces/{namespace}/events",
            params={"fieldSelector": f"involvedObject.uid={uid}"},
        )
    except Failure:
        return {}
    return last_wakes(e for e in events if e.get("reason") in WAKE_REASONS)


def cmd_status(args: argparse.Namespace) -> int:
    """Print the managed workloads."""
    return run("status", args, lambda s: _status(s, args))


def add_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler status`."""
    parser = sub.add_parser("status", help="show the workloads zeroscaler manages")
    add_connection(parser)
    scope = parser.add_mutually_exclusive_group()
    add_namespace(scope)
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    parser.add_argument(
        "-o", "--output", choices=("table", "wide", "json", "yaml"), default="table"
    )
    parser.add_argument(
        "--savings",
        action="store_true",
        help="per namespace (and in all, with -A): how many sleep, the replica time saved, and "
        "the CPU and memory their pods would request",
    )
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the table, print a workload's row again each time it changes (Ctrl-C ends)",
    )
    parser.set_defaults(func=cmd_status)
