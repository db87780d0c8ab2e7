"""`zeroscaler sleep` and `zeroscaler wake`: a person's own controls, each in an Event naming them.

The CLI makes the transition itself, in one merge patch of the workload (replicas and the status
annotations together, with a resourceVersion precondition), so there is no moment at which the
controller could read half of it; docs/DESIGN.md says why this and not a request to the controller.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import datetime

from zeroscaler.api import Conflict, NotFound, Obj
from zeroscaler.cli.session import (
    FIELD_MANAGER,
    Failure,
    Session,
    add_target,
    run,
    target_of,
)
from zeroscaler.cli.workload_view import WorkloadView, read_view
from zeroscaler.cluster.events import EventRecorder
from zeroscaler.core.annotations import STATE, WorkloadConfig, WorkloadStatus, state_label
from zeroscaler.core.durations import format_duration
from zeroscaler.core.manual import Manual, Refused, plan_sleep, plan_wake
from zeroscaler.core.workloads import WORKLOAD_RESOURCES, workload_path

Planner = Callable[[WorkloadConfig, WorkloadStatus, int, Mapping[str, str], str, datetime], Manual]
ATTEMPTS = 3  # a write that loses a race is decided again on what won
REASONS = {"sleep": "ManualSleep", "wake": "ManualWake", "restart-clock": "IdleClockRestarted"}


def patch_body(plan: Manual, resource_version: str, labels: Mapping[str, str] | None = None) -> Obj:
    """The one merge patch that makes the transition, only if nobody changed it since reading;
    the state label mirrors the state written."""
    body: Obj = {
        "metadata": {"resourceVersion": resource_version, "annotations": dict(plan.annotations)}
    }
    state = plan.annotations.get(STATE)
    if state in ("awake", "asleep"):
        changed = state_label(state, labels or {})  # type: ignore[arg-type]
        if changed:
            body["metadata"]["labels"] = changed
    if plan.action == "sleep":
        body["spec"] = {"replicas": 0}
    elif plan.action == "wake":
        body["spec"] = {"replicas": plan.replicas}
    return body


def event_message(plan: Manual, user: str, command: str, kinds: str) -> str:
    """The Event's words: what was done, by whom."""
    by = f"by {user} (zeroscaler {command})"
    if plan.action == "sleep":
        scaled = f"scaled from {plan.replicas} to 0 replicas"
        return f"put to sleep {by}: {scaled}; wakes on a change to {kinds}"
    if plan.action == "wake":
        return f"woken {by}: scaled from 0 to {plan.replicas} replicas; idle clock restarted"
    return f"kept awake {by}: idle clock restarted"


def outcome(view: WorkloadView, plan: Manual) -> str:
    """What the person is told."""
    what = f"{view.kind} {view.namespace}/{view.name}"
    timeout = view.config.idle_timeout
    sleeps = f"; it sleeps after {format_duration(timeout)} idle" if timeout else ""
    if plan.action == "sleep":
        return f"{what}: put to sleep, {plan.replicas} replicas remembered; it wakes on activity"
    if plan.action == "wake":
        return f"{what}: woken to {plan.replicas} replicas{sleeps}"
    if plan.action == "restart-clock":
        return f"{what}: already awake, idle clock restarted{sleeps}"
    return f"{what}: {plan.message}"


def kinds_of(view: WorkloadView) -> str:
    refs = [*view.config.watched, *view.config.owned]
    return ", ".join(map(str, refs)) or "the kinds its ServiceAccount may watch"


async def check_access(session: Session, kind: str, namespace: str) -> None:
    """Refuse before writing anything when either write would be denied."""
    resource = WORKLOAD_RESOURCES[kind]
    for verb, what, group in (("patch", resource, "apps"), ("create", "events", "")):
        if not await session.may(verb, what, namespace, group):
            name = f"{what}.{group}" if group else what
            raise Failure(f"access denied: you may not {verb} {name} in namespace {namespace}")


async def _labels(session: Session, namespace: str) -> Mapping[str, str] | None:
    try:
        ns = await session.get(f"/api/v1/namespaces/{namespace}")
    except (NotFound, Failure):
        return None  # unknown: the controller's view of it is not ours to read
    return dict((ns.get("metadata") or {}).get("labels") or {})


async def manual(session: Session, args: argparse.Namespace, command: str) -> int:
    planner: Planner = plan_sleep if command == "sleep" else plan_wake
    namespace, name, kind = target_of(args, session)
    obj = await session.find_workload(namespace, name, kind)
    kind = str(obj["kind"])
    await check_access(session, kind, namespace)
    user = await session.username()
    labels = await _labels(session, namespace)
    path = workload_path(kind, namespace, name)
    for _ in range(ATTEMPTS):
        view = read_view(obj, labels)
        try:
            plan = planner(
                view.config,
                view.status,
                view.replicas,
                view.annotations,
                view.unmanaged,
                await session.now(),
            )
        except Refused as e:
            raise Failure(f"{kind} {namespace}/{name}: not done: {e}") from None
        if plan.action == "none":
            print(outcome(view, plan))
            return 0
        try:
            written = await session.patch(
                path,
                patch_body(
                    plan, str(obj["metadata"]["resourceVersion"]), obj["metadata"].get("labels")
                ),
            )
        except Conflict:
            obj = {**await session.get(path), "kind": kind}
            continue
        # reportingInstance is at most 128 characters; the message names the user in full.
        recorder = EventRecorder(session.kube, FIELD_MANAGER, instance=user[:128])
        message = event_message(plan, user, command, kinds_of(view))
        await recorder.emit(written, "apps/v1", kind, "Normal", REASONS[plan.action], message)
        print(outcome(view, plan))
        return 0
    raise Failure(f"{kind} {namespace}/{name} kept changing under us; try again")


def cmd_sleep(args: argparse.Namespace) -> int:
    """Put a workload to sleep now."""
    return run("sleep", args, lambda s: manual(s, args, "sleep"))


def cmd_wake(args: argparse.Namespace) -> int:
    """Wake a workload now, or restart its idle clock."""
    return run("wake", args, lambda s: manual(s, args, "wake"))


def add_sleep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler sleep`."""
    parser = sub.add_parser("sleep", help="put a workload to sleep now (until activity wakes it)")
    add_target(parser)
    parser.set_defaults(func=cmd_sleep)


def add_wake(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler wake`."""
    parser = sub.add_parser(
        "wake", help="wake a workload now; awake already, restart its idle clock"
    )
    add_target(parser)
    parser.set_defaults(func=cmd_wake)
