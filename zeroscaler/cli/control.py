"""`zeroscaler sleep` and `zeroscaler wake`: a person's own controls, each in an Event naming them.

The CLI makes the transition itself, in one merge patch of the workload (replicas and the status
annotations together, with a resourceVersion precondition), so there is no moment at which the
controller could read half of it; docs/DESIGN.md says why this and not a request to the controller.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from zeroscaler.api import Conflict, NotFound, Obj
from zeroscaler.cli.session import (
    FIELD_MANAGER,
    TARGET_FORMS,
    Failure,
    Session,
    UsageError,
    add_target,
    option,
    run,
    target_of,
)
from zeroscaler.cli.workload_view import WorkloadView, read_view
from zeroscaler.cluster.events import EventRecorder
from zeroscaler.core.annotations import (
    OUR_PREFIXES,
    PAUSED,
    STATE,
    WorkloadConfig,
    WorkloadStatus,
    state_label,
)
from zeroscaler.core.durations import (
    DurationError,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)
from zeroscaler.core.manual import (
    Manual,
    Refused,
    plan_pause,
    plan_resume,
    plan_sleep,
    plan_wake,
)
from zeroscaler.core.workloads import WORKLOAD_RESOURCES, workload_path
from zeroscaler.runtime.clock import LoopClock

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


def has_selection(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "selector", None) or getattr(args, "all_namespaces", False))


def check_selection(args: argparse.Namespace) -> None:
    """One WORKLOAD, or a selection (`-l`, `-A`): not both, not neither."""
    if args.workload and has_selection(args):
        raise UsageError("give a WORKLOAD or a selection (-l SELECTOR, -A), not both")
    if not args.workload and not has_selection(args):
        raise UsageError(f"give a WORKLOAD ({TARGET_FORMS}), -l SELECTOR or -A")


async def select(session: Session, args: argparse.Namespace) -> list[Obj]:
    """The Deployments and StatefulSets a selection takes: those matching `-l` in the namespace
    (every namespace with `-A`) that carry a zeroscaler annotation, in name order."""
    namespace = (
        None if args.all_namespaces else (option(args, "namespace") or session.access.namespace)
    )
    params = {"labelSelector": args.selector} if args.selector else None
    found: list[Obj] = []
    for kind, resource in WORKLOAD_RESOURCES.items():
        path = workload_path(kind, namespace) if namespace else f"/apis/apps/v1/{resource}"
        found += [{**o, "kind": kind} for o in await session.list(path, params=params)]
    ours = [
        o
        for o in found
        if any(k.startswith(OUR_PREFIXES) for k in (o["metadata"].get("annotations") or {}))
    ]
    return sorted(ours, key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))


class Runner:
    """One command over one workload or many: access checked and namespaces read once each."""

    def __init__(self, session: Session, args: argparse.Namespace, command: str) -> None:
        self.session = session
        self.args = args
        self.command = command
        self._checked: set[tuple[str, str]] = set()
        self._labels: dict[str, Mapping[str, str] | None] = {}
        self._user: str | None = None

    async def user(self) -> str:
        if self._user is None:
            self._user = await self.session.username()
        return self._user

    async def labels(self, namespace: str) -> Mapping[str, str] | None:
        if namespace not in self._labels:
            self._labels[namespace] = await _labels(self.session, namespace)
        return self._labels[namespace]

    async def act(self, obj: Obj) -> str:
        """Do the command to one workload; what the person is told, or a Failure."""
        kind, meta = str(obj["kind"]), obj["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        if (kind, namespace) not in self._checked:
            await check_access(self.session, kind, namespace)
            self._checked.add((kind, namespace))
        labels = await self.labels(namespace)
        path = workload_path(kind, namespace, name)
        for _ in range(ATTEMPTS):
            now = await self.session.now()
            view = read_view(obj, labels, now)
            try:
                step = self.plan(view, now)
            except Refused as e:
                raise Failure(f"{kind} {namespace}/{name}: not done: {e}") from None
            if step.body is None:
                return step.outcome
            version = str(obj["metadata"]["resourceVersion"])
            body = {**step.body, "metadata": {**step.body["metadata"], "resourceVersion": version}}
            try:
                written = await self.session.patch(path, body)
            except Conflict:
                obj = {**await self.session.get(path), "kind": kind}
                continue
            user = await self.user()
            # reportingInstance is at most 128 characters; the message names the user in full.
            recorder = EventRecorder(
                self.session.kube, LoopClock(), FIELD_MANAGER, instance=user[:128]
            )
            message = step.event(user)
            await recorder.emit(written, "apps/v1", kind, "Normal", step.reason, message)
            return step.outcome
        raise Failure(f"{kind} {namespace}/{name} kept changing under us; try again")

    def plan(self, view: WorkloadView, now: datetime) -> Step:
        if self.command in ("pause", "resume"):
            return self._plan_pause(view, now)
        if view.pause.held and PAUSED not in view.annotations:
            raise Refused(f"it is paused ({view.pause.why}); zeroscaler resume it first")
        planner: Planner = plan_sleep if self.command == "sleep" else plan_wake
        plan = planner(
            view.config, view.status, view.replicas, view.annotations, view.unmanaged, now
        )
        if plan.action == "none":
            return Step(None, outcome(view, plan))
        body = patch_body(plan, "", view.meta.get("labels"))
        command, kinds = self.command, kinds_of(view)
        return Step(
            body,
            outcome(view, plan),
            REASONS[plan.action],
            lambda user: event_message(plan, user, command, kinds),
        )

    def _plan_pause(self, view: WorkloadView, now: datetime) -> Step:
        what = f"{view.kind} {view.namespace}/{view.name}"
        if self.command == "resume":
            changes = plan_resume(view.annotations)
            if not changes:
                return Step(None, f"{what}: not paused")
            return Step(
                {"metadata": {"annotations": changes}},
                f"{what}: resumed; zeroscaler manages it again",
                "ManualResume",
                lambda user: f"resumed by {user} (zeroscaler resume): managed again",
            )
        until = self.args.until
        if self.args.duration is not None:
            until = now + timedelta(seconds=self.args.duration)
        if until is not None and until <= now:
            raise Refused(f"--until {format_time(until)} has passed already")
        changes = plan_pause(view.annotations, until)
        held = f"until {format_time(until)}" if until is not None else "until resumed"
        if not changes:
            return Step(None, f"{what}: paused {held} already")
        return Step(
            {"metadata": {"annotations": changes}},
            f"{what}: paused {held}: no sleep, no wake",
            "ManualPause",
            lambda user: f"paused by {user} (zeroscaler pause) {held}: no sleep, no wake",
        )


@dataclass(frozen=True, slots=True)
class Step:
    """A merge patch to make (None: nothing to do), what to tell, and the Event to write."""

    body: Obj | None
    outcome: str
    reason: str = ""
    event: Callable[[str], str] = str  # the Event's words, given who asked


async def manual(session: Session, args: argparse.Namespace, command: str) -> int:
    check_selection(args)
    runner = Runner(session, args, command)
    if args.workload:
        namespace, name, kind = target_of(args, session)
        print(await runner.act(await session.find_workload(namespace, name, kind)))
        return 0
    targets = await select(session, args)
    if not targets:
        print("No workloads zeroscaler knows match.")
        return 0
    failed = 0
    for obj in targets:
        try:
            print(await runner.act(obj), flush=True)
        except Failure as e:
            failed += 1
            print(f"zeroscaler {command}: {e}", file=sys.stderr, flush=True)
    if failed:
        raise Failure(f"{failed} of {len(targets)} not done")
    return 0


def cmd_sleep(args: argparse.Namespace) -> int:
    """Put a workload to sleep now."""
    return run("sleep", args, lambda s: manual(s, args, "sleep"))


def cmd_wake(args: argparse.Namespace) -> int:
    """Wake a workload now, or restart its idle clock."""
    return run("wake", args, lambda s: manual(s, args, "wake"))


def cmd_pause(args: argparse.Namespace) -> int:
    """Hold workloads as they are."""
    return run("pause", args, lambda s: manual(s, args, "pause"))


def cmd_resume(args: argparse.Namespace) -> int:
    """End a pause."""
    return run("resume", args, lambda s: manual(s, args, "resume"))


def add_selection(parser: argparse.ArgumentParser) -> None:
    """A WORKLOAD, or the workloads a label selector takes (in every namespace with -A)."""
    add_target(parser, optional=True)
    parser.add_argument(
        "-l",
        "--selector",
        help="the Deployments and StatefulSets with these labels (key=value,...) that carry a "
        "zeroscaler annotation, instead of a WORKLOAD",
    )
    parser.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="the selection in every namespace (alone: every workload zeroscaler knows)",
    )


def add_sleep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler sleep`."""
    parser = sub.add_parser("sleep", help="put workloads to sleep now (until activity wakes them)")
    add_selection(parser)
    parser.set_defaults(func=cmd_sleep)


def add_wake(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler wake`."""
    parser = sub.add_parser(
        "wake", help="wake workloads now; awake already, restart their idle clocks"
    )
    add_selection(parser)
    parser.set_defaults(func=cmd_wake)


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds


def _time(text: str) -> datetime:
    try:
        return parse_time(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an RFC 3339 time (2026-12-01T08:00:00Z)"
        ) from None


def add_pause(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler pause`."""
    parser = sub.add_parser(
        "pause", help="hold workloads as they are (no sleep, no wake), until resumed or a time"
    )
    add_selection(parser)
    end = parser.add_mutually_exclusive_group()
    end.add_argument(
        "--for",
        dest="duration",
        type=_duration,
        metavar="DURATION",
        help="for this long from now (90m, 2h, 72h), written as the time it ends",
    )
    end.add_argument("--until", type=_time, metavar="TIME", help="until this RFC 3339 time")
    parser.set_defaults(func=cmd_pause, duration=None, until=None)


def add_resume(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler resume`."""
    parser = sub.add_parser("resume", help="end a pause: zeroscaler manages them again")
    add_selection(parser)
    parser.set_defaults(func=cmd_resume)
