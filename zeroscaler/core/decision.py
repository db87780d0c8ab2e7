"""The scaler's brain: from a workload as observed and `now`, what to do and when to look again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from zeroscaler.core.annotations import (
    PAUSED,
    WorkloadConfig,
    WorkloadStatus,
    injected_keys,
    read_config,
    read_status,
    status_keys,
)
from zeroscaler.core.due import DEFAULT_LEAD, NO_DUE, DueSummary, due_reason, due_wake_at
from zeroscaler.core.durations import format_duration, format_time
from zeroscaler.core.links import NOTHING_SERVED, Serving
from zeroscaler.core.readiness import start_bound
from zeroscaler.core.schedules import ScheduleState, describe_phase, schedule_state

Action = Literal["sleep", "wake", "record-wake", "mark-awake", "none"]

# Status times are written to the second, so shorter timeouts could not be told apart from activity.
MIN_IDLE_TIMEOUT = 1.0
# A max-sleep wake comes within this share of max-sleep after it, spread by the workload's jitter.
MAX_SLEEP_SPREAD = 0.1


@dataclass(frozen=True, slots=True)
class Observed:
    """What the controller sees of a workload besides its annotations."""

    replicas: int  # spec.replicas
    last_activity: datetime  # newest activity seen, or when watching began
    hpa_targeted: bool = False
    # A watched kind is resolved and permitted, and the controller may watch every kind named.
    can_wake: bool = True
    wake_reason: str = ""  # what the newest activity was, in an Event's words
    # Replicas our own wake scaled it to while its record is not yet written; None if no such wake.
    woken_to: int | None = None
    # What it backs; None while the registrations are not all listed (then it is not put to sleep).
    serving: Serving | None = NOTHING_SERVED
    # Woken (or first seen) and not Ready since: its idle clock waits for Ready, up to a bound.
    starting: bool = False
    ready_replicas: int = 0
    jitter: float = 0.0  # seconds after a keep-awake window's start that it is woken
    # Its due times: the latest passed, and the earliest after its sleep (awake: after now).
    due: DueSummary = NO_DUE
    # Where in the max-sleep spread its wake falls, in [0, 1): the same for it on every look.
    sleep_jitter: float = 0.0
    # Why a manager above it forbids any sleep (the cluster-version operator); "" if none does.
    kept_awake_by: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do and why; `replicas` is the count to remember (sleep) or to scale to (wake)."""

    action: Action
    replicas: int | None = None
    next_check: datetime | None = None
    reason: str = ""
    held: bool = False  # activity seen, its wake held by a forced-sleep window
    rule: str = ""  # the window that decided ("keep-awake", "forced-sleep", "hold"), if one did
    cause: str = ""  # a wake that no change asked for: "due" or "max-sleep"


def decide(
    observed: Observed, config: WorkloadConfig, status: WorkloadStatus, now: datetime
) -> Decision:
    """Sleep, wake, record a wake (ours or someone else's), or nothing (with when to look again)."""
    if config.paused:
        return Decision("none", reason=f"{PAUSED} is true; held as it is")
    schedule = schedule_state(config.windows, now)
    if status.state == "asleep":
        decision = _decide_asleep(observed, config, status, now, schedule)
    else:
        decision = _decide_awake(observed, config, status, now, schedule)
    # A window's start or end may change what is decided: looked at again then.
    boundary = schedule.next_boundary
    if decision.action != "none" or boundary is None:
        return decision
    if decision.next_check is not None and decision.next_check <= boundary:
        return decision
    return dataclasses.replace(decision, next_check=boundary)


def kept_awake(observed: Observed) -> str | None:
    """Why zeroscaler keeps an awake workload awake for reasons of its own, whatever the windows
    say; None when nothing does."""
    if observed.serving is None:
        return "what it serves is not known yet; not put to sleep"
    if observed.serving.keeps_awake:
        return observed.serving.reason()
    if observed.hpa_targeted:
        return "targeted by a HorizontalPodAutoscaler; never put to sleep"
    if not observed.can_wake:
        return "no watched or owned kind to wake on; never put to sleep"
    if observed.kept_awake_by:
        return observed.kept_awake_by
    return None


def _decide_awake(
    observed: Observed,
    config: WorkloadConfig,
    status: WorkloadStatus,
    now: datetime,
    schedule: ScheduleState,
) -> Decision:
    if observed.replicas == 0:
        return Decision("none", reason="scaled to zero by someone else; left alone")
    kept = kept_awake(observed)
    if kept is not None:
        forced = schedule.forced_sleep
        if forced is not None:  # safety first: the window is said to lose
            source = config.window_source("forced-sleep")
            kept += f"; {describe_phase(forced, 'forced-sleep', source)} does not apply"
        return Decision("none", reason=kept)
    if config.idle_timeout is None:
        return Decision("none", reason="no idle timeout")
    forced = schedule.forced_sleep
    # At the window's start, whatever its activity; a wake inside it (by activity, a person or
    # someone else) records a later last-activity, and the usual idle timeout applies again.
    if forced is not None and (status.last_activity is None or status.last_activity < forced.start):
        reason = describe_phase(forced, "forced-sleep", config.window_source("forced-sleep"))
        return Decision("sleep", replicas=observed.replicas, reason=reason, rule="forced-sleep")
    held = status.flapping_until
    if held is not None and now < held:
        return Decision(
            "none", next_check=held, reason=f"flapping: left awake until {format_time(held)}"
        )
    timeout = max(config.idle_timeout, MIN_IDLE_TIMEOUT)
    last = observed.last_activity
    if observed.due.passed is not None and observed.due.passed.at > last:
        last = observed.due.passed.at  # a due time is work: its whole timeout follows it
    deadline = last + timedelta(seconds=timeout)
    upcoming = observed.due.next
    if observed.starting:
        decision = _decide_starting(observed, timeout, deadline, now)
    elif now < deadline:
        decision = Decision("none", next_check=deadline)
    elif upcoming is not None and due_wake_at(upcoming, lead_of(config)) <= now < upcoming.at:
        # Asleep now, it would be woken at once for it: it stays up until it is due.
        decision = Decision(
            "none", next_check=upcoming.at, reason=f"{upcoming.what} is due; awake until then"
        )
    else:
        decision = Decision(
            "sleep",
            replicas=observed.replicas,
            reason=f"idle for {format_duration((now - observed.last_activity).total_seconds())} "
            f"(timeout {format_duration(timeout)})",
        )
    keep = schedule.keep_awake
    if keep is None or decision.action != "sleep":
        return decision
    source = config.window_source("keep-awake")
    return Decision(
        "none",
        next_check=keep.end,
        reason=f"{decision.reason}, but {describe_phase(keep, 'keep-awake', source)}",
        rule="keep-awake",
    )


def _decide_starting(
    observed: Observed, timeout: float, deadline: datetime, now: datetime
) -> Decision:
    """Not Ready since its wake: the clock waits for Ready, but not past the start bound."""
    given_up = deadline + timedelta(seconds=start_bound(timeout))
    if now < given_up:
        # At the timeout it is looked at again, to say it is late; then at the bound.
        return Decision(
            "none",
            next_check=deadline if now < deadline else given_up,
            reason="woken, not Ready yet; its idle clock starts when it is",
        )
    waited = format_duration((now - observed.last_activity).total_seconds())
    return Decision(
        "sleep",
        replicas=observed.replicas,
        reason=f"not Ready {waited} after its wake ({observed.ready_replicas} of "
        f"{observed.replicas} replicas ready; timeout {format_duration(timeout)} + "
        f"{format_duration(start_bound(timeout))} to start)",
    )


def not_ready_notice(
    observed: Observed, config: WorkloadConfig, status: WorkloadStatus, now: datetime
) -> tuple[str, str] | None:
    """The Warning for a woken workload still not Ready at its idle timeout, or None."""
    if not observed.starting or status.state == "asleep" or config.idle_timeout is None:
        return None
    timeout = max(config.idle_timeout, MIN_IDLE_TIMEOUT)
    deadline = observed.last_activity + timedelta(seconds=timeout)
    if now < deadline:
        return None
    given_up = deadline + timedelta(seconds=start_bound(timeout))
    return (
        "NotReady",
        f"woken at {format_time(observed.last_activity)}, not Ready after its idle timeout "
        f"{format_duration(timeout)} ({observed.ready_replicas} of {observed.replicas} replicas "
        f"ready); put back to sleep at {format_time(given_up)} unless it becomes Ready",
    )


def restart_clock(last_activity: datetime, woken_at: datetime) -> datetime:
    """Where a wake restarts the idle clock: when the workload is awake, or at newer activity."""
    return max(last_activity, woken_at)


def wake_replicas(config: WorkloadConfig, status: WorkloadStatus) -> int:
    """wake-replicas, else restore-replicas, else 1."""
    return config.wake_replicas or status.restore_replicas or 1


@dataclass(frozen=True, slots=True)
class Release:
    """How a workload is handed back: replicas to wake it to (None: as it is), keys to remove."""

    wake_to: int | None
    remove: tuple[str, ...]


def plan_release(annotations: Mapping[str, str], replicas: int, *, injected: bool) -> Release:
    """Wake a workload we left at zero and take our status off it (and, with `injected`, what
    the webhook added)."""
    config, _ = read_config(annotations)
    status, _ = read_status(annotations)
    asleep_at_zero = status.state == "asleep" and replicas == 0
    remove = [*status_keys(annotations), *(injected_keys(annotations) if injected else [])]
    return Release(wake_replicas(config, status) if asleep_at_zero else None, tuple(remove))


def lead_of(config: WorkloadConfig) -> float:
    """How long before a due time a sleeper is woken."""
    return DEFAULT_LEAD if config.due_lead is None else config.due_lead


def max_sleep_wake_at(since: datetime, max_sleep: float, jitter: float) -> datetime:
    """When a sleeper asleep since `since` is woken for having slept `max_sleep`: spread over a
    tenth of it after, by its jitter in [0, 1), so sleepers that fell asleep together wake apart."""
    spread = max_sleep * MAX_SLEEP_SPREAD * min(max(jitter, 0.0), 1.0)
    return since + timedelta(seconds=max_sleep + spread)


def next_timed_wake(
    observed: Observed, config: WorkloadConfig, since: datetime
) -> tuple[datetime, str, str] | None:
    """The earliest wake a clock asks of a sleeper (a due time, or max-sleep): when, why, and
    its cause; None if none does."""
    found: list[tuple[datetime, str, str]] = []
    upcoming = observed.due.next
    if upcoming is not None:
        lead = lead_of(config)
        found.append((due_wake_at(upcoming, lead), due_reason(upcoming, lead), "due"))
    if config.max_sleep is not None:
        at = max_sleep_wake_at(since, config.max_sleep, observed.sleep_jitter)
        slept = format_duration((at - since).total_seconds())
        reason = (
            f"asleep {slept} (max-sleep {format_duration(config.max_sleep)}): woken for one "
            "idle timeout though nothing changed"
        )
        found.append((at, reason, "max-sleep"))
    return min(found, default=None)


def schedule_notice(
    observed: Observed, config: WorkloadConfig, status: WorkloadStatus, now: datetime
) -> tuple[str, str] | None:
    """The Warning for an awake workload that a forced-sleep window would put to sleep, were it
    not kept awake for a reason of zeroscaler's own (that reason wins), or None."""
    if config.paused or status.state == "asleep" or observed.replicas == 0:
        return None
    kept = kept_awake(observed)
    if kept is None or observed.serving is None:  # not known yet: decided once it is
        return None
    forced = schedule_state(config.windows, now).forced_sleep
    if forced is None:
        return None
    window = describe_phase(forced, "forced-sleep", config.window_source("forced-sleep"))
    return "ForcedSleepOverridden", f"{window} is in force, but {kept}: safety comes first"


def _decide_asleep(
    observed: Observed,
    config: WorkloadConfig,
    status: WorkloadStatus,
    now: datetime,
    schedule: ScheduleState,
) -> Decision:
    if observed.replicas > 0:
        if observed.woken_to is not None:  # our own wake, not someone else's: record it again
            return Decision(
                "record-wake", replicas=observed.woken_to, reason="woken; recording the wake"
            )
        return Decision(
            "mark-awake", replicas=observed.replicas, reason="scaled up while asleep; now awake"
        )
    if observed.serving is not None and observed.serving.keeps_awake:
        why = observed.serving.reason().rsplit("; ", 1)[0]  # without "(never) put to sleep"
        return Decision("wake", replicas=wake_replicas(config, status), reason=why)
    since = status.asleep_since
    forced, keep = schedule.forced_sleep, schedule.keep_awake
    if since is None or observed.last_activity > since:
        if forced is not None and forced.hold and schedule.next_boundary is not None:
            window = describe_phase(forced, "forced-sleep", config.window_source("forced-sleep"))
            return Decision(
                "none",
                next_check=schedule.next_boundary,
                reason=f"{window} holds activity until {format_time(schedule.next_boundary)}",
                held=True,
                rule="hold",
            )
        return Decision("wake", replicas=wake_replicas(config, status), reason=observed.wake_reason)
    # Asleep when the window began (not put to sleep inside it by a person): woken at its start,
    # each workload a moment of its own later so that thousands do not wake in one instant.
    if keep is not None and since < keep.start:
        longest = (keep.end - keep.start).total_seconds() / 2
        at = keep.start + timedelta(seconds=min(observed.jitter, longest))
        if now < at:
            return Decision("none", next_check=at)
        source = config.window_source("keep-awake")
        return Decision(
            "wake",
            replicas=wake_replicas(config, status),
            reason=describe_phase(keep, "keep-awake", source),
            rule="keep-awake",
        )
    timed = next_timed_wake(observed, config, since)
    if timed is None:
        return Decision("none")
    at, reason, cause = timed
    if now < at:
        return Decision("none", next_check=at)
    return Decision("wake", replicas=wake_replicas(config, status), reason=reason, cause=cause)
