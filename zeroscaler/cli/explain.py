"""`zeroscaler explain NS/NAME`: why it is awake or asleep, what wakes it, what it serves, when
it sleeps."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from zeroscaler.api import NotFound, Obj
from zeroscaler.cli.session import Failure, Session, add_target, run, target_of
from zeroscaler.cli.status import WAKE_REASONS, state_of
from zeroscaler.cli.workload_view import KindScope, WakeInspector, WorkloadView, read_view
from zeroscaler.core.annotations import (
    IDLE_TIMEOUT,
    INJECTED,
    WATCH_NAMESPACES,
)
from zeroscaler.core.decision import (
    MIN_IDLE_TIMEOUT,
    Observed,
    lead_of,
    next_timed_wake,
    wake_replicas,
)
from zeroscaler.core.due import DueTime, as_time, read_due, summarize
from zeroscaler.core.durations import format_duration, format_time
from zeroscaler.core.schedules import format_windows, jitter, schedule_state
from zeroscaler.core.scope import EVERYWHERE

SLEEP_REASONS = ("Sleeping", "ManualSleep")
INDENT = "  "


def ago(when: datetime, now: datetime) -> str:
    """`2026-01-01T11:00:00Z (1h ago)`, or `(in 5m)` for a time to come."""
    seconds = (now - when).total_seconds()
    span = format_duration(abs(seconds))
    return (
        f"{format_time(when)} ({span} ago)" if seconds >= 0 else f"{format_time(when)} (in {span})"
    )


def newest(events: Iterable[Obj], reasons: Sequence[str]) -> Obj | None:
    """The newest Event with one of these reasons."""
    chosen = [e for e in events if e.get("reason") in reasons]
    return max(chosen, key=_event_time, default=None)


def _event_time(event: Obj) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def describe_state(view: WorkloadView) -> str:
    state = state_of(view)
    replicas = view.replicas
    if state == "asleep":
        return f"asleep (0 replicas; wakes to {wake_replicas(view.config, view.status)})"
    if state == "waking":
        return f"waking ({replicas} replicas; the controller has not recorded the wake yet)"
    if state == "stopped":
        return "at 0 replicas, scaled down by someone else; zeroscaler leaves it alone"
    if state == "unmanaged":
        return f"not managed ({replicas} replicas), with a status zeroscaler left on it"
    return f"awake ({replicas} replicas)"


def describe_managed(view: WorkloadView) -> list[str]:
    if view.unmanaged:
        return [f"Managed: no: {view.unmanaged}."]
    injected = {k.strip() for k in view.annotations.get(INJECTED, "").split(",") if k.strip()}
    timeout = view.config.idle_timeout or 0.0
    source = " (from policy)" if IDLE_TIMEOUT in injected else ""
    namespace = (
        "namespace opted in"
        if view.namespace_labels is not None
        else "namespace labels not readable to you"
    )
    lines = [f"Managed: yes ({namespace}); idle timeout {format_duration(timeout)}{source}."]
    if view.paused:
        lines.append(f"Paused: {view.pause.why}: held as it is (no sleep, no wake).")
    if view.flapping:
        lines.append(f"Flapping: {view.flapping}")
    return lines


def describe_kind_scope(kind_scope: KindScope, view: WorkloadView) -> list[str]:
    """One kind: the type, where it counts, and the access verdicts behind that."""
    role = "owned" if kind_scope.owned else "watched"
    head = f"{kind_scope.ref} ({role}"
    if kind_scope.resource is None:
        return [f"{head}): not served by the API server, or not listable and watchable"]
    head += f", {kind_scope.resource.group_resource}"
    head += ")" if kind_scope.resource.namespaced else ", cluster-scoped)"
    grant = kind_scope.grant
    assert grant is not None
    if not grant.permitted:
        where = "counts nowhere: the ServiceAccount may not watch it"
    elif not kind_scope.resource.namespaced:
        where = "counts everywhere"
        narrowed = _narrowing(kind_scope, view)
        if narrowed:
            where = narrowed
    elif grant.scope is None:
        where = "counts in all namespaces"
    else:
        where = "counts in namespace " + ", ".join(sorted(grant.scope))
    if kind_scope.owned and grant.permitted:
        where += ", when controlled by an object of a watched kind"
    lines = [f"{head}: {where}"]
    account = f"{view.namespace}/{view.service_account}"
    if not kind_scope.checked:
        lines.append(
            f"{INDENT}not checked: you may not create SubjectAccessReviews; "
            f"scope as annotated ({WATCH_NAMESPACES})"
        )
    elif kind_scope.verdicts:
        said = ", ".join(
            f"{'all namespaces' if ns == EVERYWHERE else ns}: {'yes' if ok else 'no'}"
            for ns, ok in kind_scope.verdicts
        )
        lines.append(f"{INDENT}ServiceAccount {account} may watch it: {said}")
    return lines


def _narrowing(kind_scope: KindScope, view: WorkloadView) -> str:
    """Cluster-scoped Namespaces and CRDs count only for where the workload works."""
    assert kind_scope.resource is not None
    works_in: set[str] = set()
    for r in view.kinds:
        if r.counts and not r.owned and r.resource is not None and r.resource.namespaced:
            if r.grant is None or r.grant.scope is None:
                return ""
            works_in |= r.grant.scope
    if not works_in:
        return ""
    if (kind_scope.resource.group, kind_scope.resource.kind) == ("", "Namespace"):
        return "counts only for namespace " + ", ".join(sorted(works_in))
    if kind_scope.resource.kind == "CustomResourceDefinition":
        return "counts only for the CRDs of its watched kinds"
    return ""


def describe_serving(view: WorkloadView) -> list[str]:
    """What the API server calls it for (the links the controller reads), and what may not be
    read; nothing when it was not looked at."""
    serving = view.serving
    if serving is None:
        return []
    lines = [f"{INDENT}backs {link}" for link in serving.links]
    if serving.admission and serving.unanswered is None:
        lines.append(f"{INDENT}while it sleeps, the activator answers for its admission webhooks")
    if not lines:
        lines = [f"{INDENT}nothing the API server calls (no webhook, conversion or APIService)"]
    if view.serving_unread:
        lines.append(
            f"{INDENT}you may not " + "; ".join(view.serving_unread) + ": it may serve more"
        )
    return ["Serves:", *lines]


def describe_windows(view: WorkloadView, now: datetime) -> list[str]:
    """Its windows, which one is in force now and until when, and which rule wins."""
    config = view.config
    if not config.windows:
        return []
    lines = ["Windows:"]
    for kind in ("keep-awake", "forced-sleep"):
        text = format_windows(w for w in config.windows if w.kind == kind)
        if text:
            lines.append(f"{INDENT}{kind}: {text} ({config.window_source(kind)})")
    schedule = schedule_state(config.windows, now)
    keep, forced = schedule.keep_awake, schedule.forced_sleep
    until = f" until {ago(schedule.next_boundary, now)}" if schedule.next_boundary else ""
    if keep is not None:
        lines.append(f"{INDENT}in force: keep-awake{until}: it is not put to sleep")
    elif forced is not None:
        does = "activity is held until it ends" if forced.hold else "activity wakes it as usual"
        lines.append(f"{INDENT}in force: forced-sleep{until}: {does}")
        serving = view.serving
        if serving is not None and serving.keeps_awake:
            lines.append(
                f"{INDENT}it {serving.reason().split('; ')[0]}: safety comes first, the "
                "forced-sleep window does not apply"
            )
    else:
        lines.append(f"{INDENT}in force: none; the next starts or ends{until}")
    return lines


def describe_when(view: WorkloadView, now: datetime) -> list[str]:
    """When it will sleep (or what it waits for), from where its idle clock stands."""
    state = state_of(view)
    if view.unmanaged or state == "stopped":
        return ["Sleeps: never while it is not managed."]
    if view.paused:
        return ["Sleeps: not while paused."]
    serving = view.serving
    schedule = schedule_state(view.config.windows, now)
    if state in ("asleep", "waking"):
        since = view.status.asleep_since
        slept = f" since {ago(since, now)}" if since else ""
        if serving is not None and serving.keeps_awake:
            return [f"Asleep{slept}, but it {serving.reason()}: the controller wakes it."]
        forced, keep = schedule.forced_sleep, schedule.keep_awake
        if forced is not None and forced.hold and schedule.next_boundary is not None:
            end = ago(schedule.next_boundary, now)
            return [f"Asleep{slept}: a change now is held until {end}, then it wakes."]
        if keep is not None and since is not None and since < keep.start:
            return [f"Asleep{slept}: a keep-awake window is in force; the controller wakes it."]
        return [f"Asleep{slept}: it wakes on the next change to a kind that counts, above."]
    if serving is not None and serving.keeps_awake:
        return [f"Sleeps: {serving.reason()}."]
    forced = schedule.forced_sleep
    last = view.status.last_activity
    if forced is not None and (last is None or last < forced.start):
        return ["Sleeps: now: a forced-sleep window is in force (see Windows)."]
    if view.kinds and not any(r.counts and not r.owned for r in view.kinds):
        return ["Sleeps: never: no watched kind can be watched, so nothing could wake it."]
    since = view.idle_since
    timeout = max(view.config.idle_timeout or 0.0, MIN_IDLE_TIMEOUT)
    if since is None:
        return ["Sleeps: unknown: no time of last activity is known."]
    lines = []
    if view.seen is not None and view.seen.at == since:
        a = view.seen.activity
        where = f"{a.namespace}/{a.name}" if a.namespace else a.name
        lines.append(f"Last activity: {a.kind} {where} changed at {ago(since, now)}.")
    else:
        lines.append(f"Idle since: {ago(since, now)} (the last wake or change recorded).")
    if not view.complete:
        lines.append(f"{INDENT}you may not " + "; ".join(view.unlisted) + ": it may be later")
    deadline = since + timedelta(seconds=timeout)
    keep = schedule.keep_awake
    if keep is not None and deadline < keep.end:
        lines.append(f"Sleeps: not before {ago(keep.end, now)}: a keep-awake window is in force.")
    elif deadline <= now:
        lines.append("Sleeps: now, at the controller's next look.")
    else:
        lines.append(f"Sleeps: at {ago(deadline, now)}, unless something changes.")
    return lines


def describe_timed_wake(view: WorkloadView, due: Sequence[DueTime], now: datetime) -> list[str]:
    """The next wake a clock asks for (a due time, or max-sleep) and why; for an awake workload,
    the next due time."""
    if view.unmanaged or view.paused:
        return []
    asleep = view.status.state == "asleep"
    since = view.status.asleep_since if asleep and view.status.asleep_since else now
    summary = summarize(due, now, since)
    if not asleep:
        if summary.next is None:
            return []
        lead = format_duration(lead_of(view.config))
        return [f"Next due: {summary.next.what} at {ago(summary.next.at, now)} (lead {lead})."]
    label = f"{view.kind}/{view.namespace}/{view.name}"  # as the controller seeds its jitter
    observed = Observed(0, since, due=summary, sleep_jitter=jitter(label, 1.0))
    timed = next_timed_wake(observed, view.config, since)
    if timed is None:
        return ["Next wake: on a change only (no due time ahead, no max-sleep)."]
    at, reason, _ = timed
    return [f"Next wake: at {ago(at, now)}: {reason}."]


def describe_warnings(view: WorkloadView, events: Iterable[Obj], now: datetime) -> list[str]:
    lines = [f"{INDENT}{p}; ignored" for p in view.problems]
    seen: set[tuple[str, str]] = set()
    for event in sorted(events, key=_event_time, reverse=True):
        key = (str(event.get("reason", "")), str(event.get("message", "")))
        if event.get("type") != "Warning" or key in seen:
            continue
        seen.add(key)
        count = int(event.get("count") or 1)
        times = f", {count} times" if count > 1 else ""
        lines.append(f"{INDENT}Event {key[0]}{times}, last at {_event_time(event)}: {key[1]}")
    return ["Warnings:", *(lines or [f"{INDENT}none"])]


def explain_lines(
    view: WorkloadView, events: Sequence[Obj], now: datetime, due: Sequence[DueTime] = ()
) -> list[str]:
    """The whole explanation, line by line."""
    lines = [f"{view.kind} {view.namespace}/{view.name}: {describe_state(view)}"]
    lines += describe_managed(view)
    if view.status.state == "asleep":
        why = newest(events, SLEEP_REASONS)
        if why is not None:
            lines.append(f"Put to sleep: {why.get('message', '')}")
    else:
        why = newest(events, WAKE_REASONS)
        if why is not None:
            lines.append(f"Last woken: {why.get('message', '')}")
    if not view.unmanaged:
        lines.append("What wakes it:")
        for kind_scope in view.kinds:
            lines += [INDENT + line for line in describe_kind_scope(kind_scope, view)]
        if not view.kinds:
            lines.append(f"{INDENT}no watched or owned kinds are annotated")
    lines += describe_serving(view)
    lines += describe_windows(view, now)
    lines += describe_when(view, now)
    lines += describe_timed_wake(view, due, now)
    lines += describe_warnings(view, events, now)
    return lines


async def _explain(session: Session, args: argparse.Namespace) -> int:
    namespace, name, kind = target_of(args, session)
    obj = await session.find_workload(namespace, name, kind)
    try:
        ns = await session.get(f"/api/v1/namespaces/{namespace}")
        labels: dict[str, str] | None = dict((ns.get("metadata") or {}).get("labels") or {})
    except (NotFound, Failure):
        labels = None
    view = read_view(obj, labels, await session.now())
    if not view.unmanaged:
        inspector = WakeInspector(session)
        await inspector.inspect(view, activity=True)
        await inspector.inspect_serving(view)
    uid = str(obj["metadata"].get("uid", ""))
    try:
        events = await session.list(
            f"/api/v1/namespaces/{namespace}/events",
            params={"fieldSelector": f"involvedObject.uid={uid}"},
        )
    except Failure:
        events = []
    now = await session.now()
    due = await _due_times(session, view) if view.config.due_times else []
    print("\n".join(explain_lines(view, events, now, due)))
    return 0


async def _due_times(session: Session, view: WorkloadView) -> list[DueTime]:
    """The due times of its watched kinds' objects where they count for it, as you may list them
    (whole objects: the fields are not in the metadata)."""
    found: list[DueTime] = []
    for due in view.config.due_times:
        for kind in view.kinds:
            resource, grant = kind.resource, kind.grant
            if kind.owned or not kind.counts or resource is None or grant is None:
                continue
            ref = due.kind
            if (ref.group or "") != resource.group or ref.kind not in (None, resource.kind):
                continue
            if ref.resource not in (None, resource.resource):
                continue
            places = [None] if grant.scope is None else sorted(grant.scope)
            for namespace in places:
                try:
                    objs = await session.list(resource.api_path(namespace))
                except Failure:
                    continue
                for obj in objs:
                    seconds = read_due(obj, due.path)
                    if seconds is None:
                        continue
                    meta = obj.get("metadata") or {}
                    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
                    found.append(DueTime(as_time(seconds), f"{resource.kind} {where} {due.field}"))
    return found


def cmd_explain(args: argparse.Namespace) -> int:
    """Explain one workload."""
    return run("explain", args, lambda s: _explain(s, args))


def add_explain(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler explain`."""
    parser = sub.add_parser(
        "explain", help="why a workload is awake or asleep, what wakes it, when it sleeps"
    )
    add_target(parser)
    parser.set_defaults(func=cmd_explain)
