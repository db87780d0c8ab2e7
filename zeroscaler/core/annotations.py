"""Annotation and label keys (here alone), reading them into typed values, and what is written."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from zeroscaler.core.due import DueField, parse_due_fields
from zeroscaler.core.durations import (
    DURATION_FORM,
    DurationError,
    _short,
    format_time,
    parse_duration,
    parse_time,
)
from zeroscaler.core.kinds import (
    KIND_REF_FORM,
    KindRef,
    kind_ref_from_api_version,
    parse_kind_refs,
)
from zeroscaler.core.schedules import (
    PAUSE_FORM,
    PauseUntil,
    Window,
    WindowError,
    WindowKind,
    parse_pause_until,
    parse_windows,
    pause_end,
)

PREFIX = "zeroscaler.io/"

# Written by people or by the webhook.
IDLE_TIMEOUT = PREFIX + "idle-timeout"
WATCHED_KINDS = PREFIX + "watched-kinds"
OWNED_KINDS = PREFIX + "owned-kinds"
WATCH_NAMESPACES = PREFIX + "watch-namespaces"
WAKE_REPLICAS = PREFIX + "wake-replicas"
ENABLED = PREFIX + "enabled"
PAUSED = PREFIX + "paused"  # "true" holds a workload as it is
PAUSED_UNTIL = PREFIX + "paused-until"  # holds it until a time, or for a duration once written
KEEP_AWAKE = PREFIX + "keep-awake"  # windows in which it is never put to sleep
FORCED_SLEEP = PREFIX + "forced-sleep"  # windows in which it is put to sleep
MAX_SLEEP = PREFIX + "max-sleep"  # woken for one idle timeout after this long asleep
DUE_TIMES = PREFIX + "due-times"  # per kind, a field holding when the operator has work
DUE_LEAD = PREFIX + "due-lead"  # how long before a due time it is woken
# Written by the controller only.
STATE = PREFIX + "state"
RESTORE_REPLICAS = PREFIX + "restore-replicas"
ASLEEP_SINCE = PREFIX + "asleep-since"
LAST_ACTIVITY = PREFIX + "last-activity"
FLAPPING = PREFIX + "flapping"  # woken again and again by the same manifest re-applied
CENSUS = PREFIX + "census"  # per kind: objects in scope at the last sleep, and their digest
FLAPPING_UNTIL = PREFIX + "flapping-until"  # woken right after each sleep: left awake until then
# Written by the webhook and the controller: the keys whose values came from policy.
# Everything the controller writes about a workload's state; a release removes them all.
STATUS_KEYS = (
    STATE, RESTORE_REPLICAS, ASLEEP_SINCE, LAST_ACTIVITY, CENSUS, FLAPPING, FLAPPING_UNTIL,
)  # fmt: skip
INJECTED = PREFIX + "injected"
# The keys policy gives; listed in INJECTED they follow the policy in force.
POLICY_KEYS = frozenset(
    {
        IDLE_TIMEOUT, WATCHED_KINDS, OWNED_KINDS, WATCH_NAMESPACES, KEEP_AWAKE, FORCED_SLEEP,
        MAX_SLEEP, DUE_TIMES, DUE_LEAD,
    }
)  # fmt: skip
WINDOW_KEYS: dict[WindowKind, str] = {"keep-awake": KEEP_AWAKE, "forced-sleep": FORCED_SLEEP}
# The field manager of every write the controller makes (GitOps tools are told to leave its fields).
FIELD_MANAGER = "zeroscaler"

# Labels.
NAMESPACE_ENABLED_LABEL = PREFIX + "enabled"
NAMESPACE_DRY_RUN_LABEL = PREFIX + "dry-run"  # "true": decided and reported there, nothing done
STATE_LABEL = STATE  # the state again, as a label people can select on
POLICY_LABEL = PREFIX + "policy"
POLICY_KEY = "policy.yaml"

# IBM controller-zero-scaler keys, read as aliases (its README and examples use both timeout keys).
IBM_IDLE_TIMEOUT = ("controller-zero-scaler/idleTimeout", "controller-zero-scaler/zeroScaleTimeout")
IBM_WATCHED_KINDS = "controller-zero-scaler/watchedKinds"
IBM_OWNED_KINDS = "controller-zero-scaler/ownedKinds"
# Every annotation zeroscaler reads starts with one of these.
OUR_PREFIXES = (PREFIX, "controller-zero-scaler/")

LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"

MAX_VALUE_LEN = 16_384  # longer values are rejected, so a hostile annotation cannot cost much
NAMESPACES_FORM = '"*" or a comma-separated list of namespace names'
REPLICAS_FORM = "a whole number of replicas, 1 or more"
IBM_KINDS_FORM = '[{"apiVersion": "group/version", "kind": "Kind"}]'

State = Literal["awake", "asleep"]
Notice = tuple[str, str]  # an Event reason and its message
_TIMEOUT_KEYS = (IDLE_TIMEOUT, *IBM_IDLE_TIMEOUT)
_KIND_KEYS = (WATCHED_KINDS, OWNED_KINDS, IBM_WATCHED_KINDS, IBM_OWNED_KINDS)


@dataclass(frozen=True, slots=True)
class Problem:
    """A malformed annotation: which key, and a message naming the expected form."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """What a workload's annotations ask of zeroscaler."""

    opted_out: bool = False
    paused: bool = False  # held as it is: no sleep, no wake, nothing restored
    idle_timeout: float | None = None
    watched: tuple[KindRef, ...] = ()
    owned: tuple[KindRef, ...] = ()
    watch_namespaces: tuple[str, ...] | None = None  # None: from RBAC; ("*",): all namespaces
    wake_replicas: int | None = None
    windows: tuple[Window, ...] = ()  # keep-awake and forced-sleep
    pause_until: PauseUntil | None = None
    from_policy: frozenset[str] = frozenset()  # the policy keys listed as injected
    max_sleep: float | None = None  # seconds; None: never woken for having slept long
    due_times: tuple[DueField, ...] = ()
    due_lead: float | None = None  # seconds; None: the default lead

    @property
    def has_kinds(self) -> bool:
        return bool(self.watched or self.owned)

    def window_source(self, kind: WindowKind) -> str:
        """Where a kind of window came from, for messages."""
        key = WINDOW_KEYS[kind]
        return f"policy, {key}" if key in self.from_policy else f"annotation {key}"


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    """What the controller last recorded on a workload."""

    state: State | None = None
    restore_replicas: int | None = None
    asleep_since: datetime | None = None
    last_activity: datetime | None = None
    flapping_until: datetime | None = None  # left awake until then (woken right after sleeps)


def read_config(annotations: Mapping[str, str]) -> tuple[WorkloadConfig, list[Problem]]:
    """Parse the user-facing annotations; bad values are left out and reported, never raised."""
    problems: list[Problem] = []
    timeout = _read_timeout(annotations, problems)
    watched = _read_kinds(annotations, WATCHED_KINDS, IBM_WATCHED_KINDS, problems)
    owned = _read_kinds(annotations, OWNED_KINDS, IBM_OWNED_KINDS, problems)
    namespaces = _read_namespaces(annotations.get(WATCH_NAMESPACES), problems)
    wake = _read_replicas(annotations, WAKE_REPLICAS, problems, minimum=1)
    enabled = annotations.get(ENABLED)
    if enabled is not None and enabled.strip().lower() not in ("true", "false"):
        problems.append(Problem(ENABLED, f'{_short(enabled)} is not "true" or "false"'))
    paused = annotations.get(PAUSED)
    if paused is not None and paused.strip().lower() not in ("true", "false"):
        problems.append(Problem(PAUSED, f'{_short(paused)} is not "true" or "false"'))
    max_sleep = _read_positive_duration(annotations, MAX_SLEEP, problems)
    due_lead = _read_positive_duration(annotations, DUE_LEAD, problems, zero=True)
    due_times: tuple[DueField, ...] = ()
    if (due_text := annotations.get(DUE_TIMES)) is not None and not _too_long(
        DUE_TIMES, due_text, problems
    ):
        due_times, errors = parse_due_fields(due_text)
        problems.extend(Problem(DUE_TIMES, e) for e in errors)
    config = WorkloadConfig(
        opted_out=(enabled or "").strip().lower() == "false",
        paused=(paused or "").strip().lower() == "true",
        idle_timeout=timeout,
        watched=watched,
        owned=owned,
        watch_namespaces=namespaces,
        wake_replicas=wake,
        windows=_read_windows(annotations, problems),
        pause_until=_read_pause_until(annotations, problems),
        from_policy=frozenset(read_injected(annotations)) & POLICY_KEYS
        if INJECTED in annotations
        else frozenset(),
        max_sleep=max_sleep,
        due_times=due_times,
        due_lead=due_lead,
    )
    return config, problems


@dataclass(frozen=True, slots=True)
class Pause:
    """Whether a person holds the workload as it is now, why, and until when."""

    why: str = ""  # empty: not held
    until: datetime | None = None  # the end of a pause by paused-until, passed or not
    problem: str = ""  # a duration whose writing the API server kept no time of

    @property
    def held(self) -> bool:
        return bool(self.why)


def pause_in_force(config: WorkloadConfig, set_at: datetime | None, now: datetime) -> Pause:
    """`paused: "true"` holds until removed; `paused-until` until its time, or its duration
    after the API server recorded the annotation being written (`paused_until_set_at`)."""
    if config.paused:
        return Pause(f'{PAUSED} is "true"')
    if config.pause_until is None:
        return Pause()
    end = pause_end(config.pause_until, set_at)
    if end is None:
        return Pause(
            problem=f"{PAUSED_UNTIL}: a duration, but the API server recorded no time it was "
            f"written (managedFields); write {PAUSE_FORM.split(' or ')[0]}; ignored"
        )
    return Pause(f"{PAUSED_UNTIL} {format_time(end)}" if now < end else "", end)


def paused_until_set_at(managed_fields: object) -> datetime | None:
    """When the API server recorded `paused-until` being written: the newest time of a
    managedFields entry that owns it (a manager's entry moves when it changes any of its
    fields)."""
    if not isinstance(managed_fields, list):
        return None
    field = "f:" + PAUSED_UNTIL
    found: datetime | None = None
    for entry in managed_fields:
        fields = entry.get("fieldsV1") if isinstance(entry, dict) else None
        meta = fields.get("f:metadata") if isinstance(fields, dict) else None
        owned = meta.get("f:annotations") if isinstance(meta, dict) else None
        if not isinstance(owned, dict) or field not in owned:
            continue
        try:
            when = parse_time(str(entry.get("time", "")))
        except ValueError:
            continue
        found = when if found is None else max(found, when)
    return found


def read_status(annotations: Mapping[str, str]) -> tuple[WorkloadStatus, list[Problem]]:
    """Parse the controller's own status annotations."""
    problems: list[Problem] = []
    raw_state = annotations.get(STATE)
    state: State | None = None
    if raw_state in ("awake", "asleep"):
        state = raw_state  # type: ignore[assignment]
    elif raw_state is not None:
        problems.append(Problem(STATE, f'{_short(raw_state)} is not "awake" or "asleep"'))
    return (
        WorkloadStatus(
            state=state,
            restore_replicas=_read_replicas(annotations, RESTORE_REPLICAS, problems, minimum=1),
            asleep_since=_read_time(annotations, ASLEEP_SINCE, problems),
            last_activity=_read_time(annotations, LAST_ACTIVITY, problems),
            flapping_until=_read_time(annotations, FLAPPING_UNTIL, problems),
        ),
        problems,
    )


def read_injected(annotations: Mapping[str, str]) -> list[str]:
    """The keys listed in `zeroscaler.io/injected`, in order."""
    return list(
        dict.fromkeys(k.strip() for k in annotations.get(INJECTED, "").split(",") if k.strip())
    )


def has_kinds_annotated(annotations: Mapping[str, str]) -> bool:
    """Whether any watched or owned kinds key is present (ours or IBM's), valid or not."""
    return any(k in annotations for k in _KIND_KEYS)


def kind_list_keys(annotations: Mapping[str, str]) -> tuple[str, str]:
    """The keys the watched and the owned kinds were read from, for messages about them."""
    watched = WATCHED_KINDS if WATCHED_KINDS in annotations else IBM_WATCHED_KINDS
    owned = OWNED_KINDS if OWNED_KINDS in annotations else IBM_OWNED_KINDS
    return watched, owned


def missing_settings(annotations: Mapping[str, str]) -> list[Notice]:
    """What an incomplete workload lacks: a timeout without kinds, or kinds without a timeout."""
    has_timeout = any(k in annotations for k in _TIMEOUT_KEYS)
    has_kinds = has_kinds_annotated(annotations)
    found: list[Notice] = []
    if has_timeout and not has_kinds:
        found.append(
            (
                "NoKindToWakeOn",
                f"{WATCHED_KINDS} is missing ({KIND_REF_FORM}); without a kind to wake "
                "on it is never put to sleep",
            )
        )
    if has_kinds and not has_timeout:
        found.append(("NoIdleTimeout", f"{IDLE_TIMEOUT} is missing (use {DURATION_FORM})"))
    return found


def kinds_inferred(account: str, watched: Sequence[str], owned: Sequence[str]) -> Notice:
    """The notice that kinds were inferred from a ServiceAccount's (`namespace/name`) RBAC."""
    message = (
        f"{WATCHED_KINDS} is missing; inferred from the RBAC of ServiceAccount {account}: "
        f"watched {', '.join(watched)}" + (f"; owned {', '.join(owned)}" if owned else "")
    )
    return "KindsInferred", message


def is_namespace_enabled(labels: Mapping[str, str]) -> bool:
    """Whether a namespace's labels opt its workloads in."""
    return labels.get(NAMESPACE_ENABLED_LABEL) == "true"


def asleep_annotations(
    restore_replicas: int, since: datetime, last_activity: datetime
) -> dict[str, str]:
    """The status a sleep records, before the scale write."""
    return {
        STATE: "asleep",
        RESTORE_REPLICAS: str(restore_replicas),
        ASLEEP_SINCE: format_time(since),
        LAST_ACTIVITY: format_time(last_activity),
    }


def status_keys(annotations: Mapping[str, str]) -> list[str]:
    """The controller's status keys that a workload carries."""
    return [k for k in STATUS_KEYS if k in annotations]


def injected_keys(annotations: Mapping[str, str]) -> list[str]:
    """The zeroscaler keys the webhook recorded adding that a workload carries, and the record."""
    listed = [k.strip() for k in annotations.get(INJECTED, "").split(",") if k.strip()]
    keys = [k for k in dict.fromkeys(listed) if k.startswith(PREFIX) and k in annotations]
    return [*keys, INJECTED] if INJECTED in annotations else keys


def state_label(state: State | None, labels: Mapping[str, str]) -> dict[str, str | None]:
    """The label change (merge patch) that mirrors `state`, or nothing when it already does;
    None removes it."""
    if labels.get(STATE_LABEL) == state:
        return {}
    return {STATE_LABEL: state}


def awake_annotations(last_activity: datetime) -> dict[str, str]:
    """The status a wake records, after the scale write."""
    return {STATE: "awake", LAST_ACTIVITY: format_time(last_activity)}


def _too_long(key: str, value: str, problems: list[Problem]) -> bool:
    if len(value) > MAX_VALUE_LEN:
        problems.append(Problem(key, f"value is {len(value)} characters, over {MAX_VALUE_LEN}"))
        return True
    return False


def _read_timeout(annotations: Mapping[str, str], problems: list[Problem]) -> float | None:
    key = IDLE_TIMEOUT
    value = annotations.get(key)
    if value is None:
        key, value = next(
            ((k, annotations[k]) for k in IBM_IDLE_TIMEOUT if k in annotations), (key, None)
        )
    if value is None or _too_long(key, value, problems):
        return None
    try:
        seconds = parse_duration(value)
    except DurationError as e:
        problems.append(Problem(key, str(e)))
        return None
    if seconds <= 0:
        problems.append(Problem(key, f"{_short(value)} must be longer than zero ({DURATION_FORM})"))
        return None
    return seconds


def _read_positive_duration(
    annotations: Mapping[str, str], key: str, problems: list[Problem], *, zero: bool = False
) -> float | None:
    value = annotations.get(key)
    if value is None or _too_long(key, value, problems):
        return None
    try:
        seconds = parse_duration(value)
    except DurationError as e:
        problems.append(Problem(key, str(e)))
        return None
    if seconds < 0 or (seconds == 0 and not zero):
        problems.append(Problem(key, f"{_short(value)} must be longer than zero ({DURATION_FORM})"))
        return None
    return seconds


def _read_kinds(
    annotations: Mapping[str, str], key: str, ibm_key: str, problems: list[Problem]
) -> tuple[KindRef, ...]:
    if key in annotations:
        value = annotations[key]
        if _too_long(key, value, problems):
            return ()
        refs, errors = parse_kind_refs(value)
        problems.extend(Problem(key, e) for e in errors)
        return tuple(refs)
    if ibm_key in annotations:
        value = annotations[ibm_key]
        if _too_long(ibm_key, value, problems):
            return ()
        return tuple(_read_ibm_kinds(ibm_key, value, problems))
    return ()


def _read_ibm_kinds(key: str, value: str, problems: list[Problem]) -> list[KindRef]:
    try:
        items = json.loads(value)
    except json.JSONDecodeError:
        problems.append(Problem(key, f"{_short(value)} is not JSON (use {IBM_KINDS_FORM})"))
        return []
    if not isinstance(items, list):
        problems.append(Problem(key, f"{_short(value)} is not a JSON list (use {IBM_KINDS_FORM})"))
        return []
    refs = []
    for item in items:
        kind = item.get("kind", item.get("Kind")) if isinstance(item, dict) else None
        api_version = item.get("apiVersion") if isinstance(item, dict) else None
        if not isinstance(kind, str) or not isinstance(api_version, str) or not kind:
            problems.append(Problem(key, f"{_short(json.dumps(item))} is not {IBM_KINDS_FORM}"))
            continue
        refs.append(kind_ref_from_api_version(api_version, kind))
    return refs


def _read_windows(annotations: Mapping[str, str], problems: list[Problem]) -> tuple[Window, ...]:
    """Both kinds of window; a key with one bad window is ignored whole, never half read."""
    windows: list[Window] = []
    for kind, key in WINDOW_KEYS.items():
        value = annotations.get(key)
        if value is None or _too_long(key, value, problems):
            continue
        try:
            windows.extend(parse_windows(value, kind))
        except WindowError as e:
            problems.append(Problem(key, str(e)))
    return tuple(windows)


def _read_pause_until(annotations: Mapping[str, str], problems: list[Problem]) -> PauseUntil | None:
    value = annotations.get(PAUSED_UNTIL)
    if value is None or _too_long(PAUSED_UNTIL, value, problems):
        return None
    try:
        return parse_pause_until(value)
    except WindowError as e:
        problems.append(Problem(PAUSED_UNTIL, str(e)))
        return None


def _read_namespaces(value: str | None, problems: list[Problem]) -> tuple[str, ...] | None:
    if value is None or _too_long(WATCH_NAMESPACES, value, problems):
        return None
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    if not names or ("*" in names and len(names) > 1):
        problems.append(Problem(WATCH_NAMESPACES, f"{_short(value)} is not {NAMESPACES_FORM}"))
        return None
    return names


def _read_replicas(
    annotations: Mapping[str, str], key: str, problems: list[Problem], minimum: int
) -> int | None:
    value = annotations.get(key)
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or len(text) > 9 or int(text) < minimum:
        problems.append(Problem(key, f"{_short(value)} is not {REPLICAS_FORM}"))
        return None
    return int(text)


def _read_time(
    annotations: Mapping[str, str], key: str, problems: list[Problem]
) -> datetime | None:
    value = annotations.get(key)
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError:
        problems.append(Problem(key, f"{_short(value)} is not an RFC 3339 time"))
        return None
