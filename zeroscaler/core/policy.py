"""Administrator policy: parse and validate `policy.yaml`, merge ConfigMaps, evaluate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import yaml

from zeroscaler.core.annotations import NAMESPACE_DRY_RUN_LABEL
from zeroscaler.core.due import DueField, parse_due_field
from zeroscaler.core.durations import DURATION_FORM, DurationError, format_duration, parse_duration
from zeroscaler.core.kinds import KIND_REF_FORM, parse_kind_refs
from zeroscaler.core.schedules import (
    MAX_WINDOWS,
    WINDOW_FORM,
    Window,
    WindowError,
    WindowKind,
    make_window,
    parse_windows,
)
from zeroscaler.core.selectors import EVERYTHING, Selector, SelectorError, parse_selector

DEFAULT_IDLE_TIMEOUT = 15 * 60.0
# A controller-runtime manager (and cert-manager) re-lists and reconciles everything every 10 h by
# default: an operator asleep no longer than that misses none of the resyncs it would have run.
DEFAULT_MAX_SLEEP = 10 * 3600.0
# Well-known operators that publish, per object, when they next have work, and act on it only
# from a timer in memory (docs/DESIGN.md, "Work on a clock"). An administrator's `dueTimes`
# extends this table; a kind set to "" there is taken out.
BUILTIN_DUE_TIMES: Mapping[str, str] = {"Certificate.cert-manager.io": "status.renewalTime"}
DEFAULT_MAX_KINDS = 50
DEFAULT_IGNORE = (
    "events",
    "events.events.k8s.io",
    "leases.coordination.k8s.io",
    "tokenreviews.authentication.k8s.io",
    "subjectaccessreviews.authorization.k8s.io",
)
_TOP_FIELDS = ("defaults", "bounds", "rules", "inference")
_DEFAULT_FIELDS = (
    "idleTimeout", "failOpenWebhooks", "keepAwake", "forcedSleep", "dryRun", "maxSleep",
    "dueLead", "dueTimes",
)  # fmt: skip
_WINDOW_FIELDS = ("days", "start", "end", "timeZone", "except", "activity")
_WINDOW_MAP_FORM = (
    "a map with days, start, end, timeZone and optionally except and activity "
    "(e.g. {days: Mon-Fri, start: '20:00', end: '07:00', timeZone: Europe/Berlin})"
)
_BOUND_FIELDS = ("minIdleTimeout", "maxIdleTimeout")
_INFERENCE_FIELDS = ("fromRBAC", "ignore", "maxKinds")
_RULE_FIELDS = (
    "name",
    "namespaceSelector",
    "workloadSelector",
    "idleTimeout",
    "enabled",
    "watchedKinds",
    "ownedKinds",
    "keepAwake",
    "forcedSleep",
    "dryRun",
    "maxSleep",
    "dueLead",
    "failOpenWebhooks",
)
# What a backend whose admission webhook has `failurePolicy: Ignore` does: a request it covers
# that comes before it is Ready again after a wake is admitted unreviewed, so by default it stays
# awake; an administrator may let it sleep.
FAIL_OPEN_CHOICES = ("stayAwake", "sleep")
FAIL_OPEN_DEFAULT = "stayAwake"
_MAX_TEXT = 1_000_000


class PolicyError(ValueError):
    """Policy that cannot be used; every problem names its source, field and expected form."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True, slots=True)
class Rule:
    """One `rules` entry: where it applies and what it overrides (None: keep the default)."""

    name: str
    source: str = ""
    namespace_selector: Selector = EVERYTHING
    workload_selector: Selector = EVERYTHING
    idle_timeout: float | None = None
    enabled: bool | None = None
    watched_kinds: tuple[str, ...] | None = None
    owned_kinds: tuple[str, ...] | None = None
    keep_awake: tuple[Window, ...] | None = None
    forced_sleep: tuple[Window, ...] | None = None
    dry_run: bool | None = None
    max_sleep: float | None = None  # 0: never woken for having slept long
    due_lead: float | None = None
    fail_open_webhooks: str | None = None

    def matches(
        self, namespace_labels: Mapping[str, str], workload_labels: Mapping[str, str]
    ) -> bool:
        return self.namespace_selector.matches(namespace_labels) and self.workload_selector.matches(
            workload_labels
        )


@dataclass(frozen=True, slots=True)
class PolicyDocument:
    """One ConfigMap's `policy.yaml`; None fields are left to other documents or the defaults."""

    source: str
    idle_timeout: float | None = None
    keep_awake: tuple[Window, ...] | None = None
    forced_sleep: tuple[Window, ...] | None = None
    dry_run: bool | None = None
    min_idle_timeout: float | None = None
    max_idle_timeout: float | None = None
    rules: tuple[Rule, ...] = ()
    from_rbac: bool | None = None
    ignore: tuple[str, ...] | None = None
    max_kinds: int | None = None
    max_sleep: float | None = None
    due_lead: float | None = None
    due_times: Mapping[str, str] | None = None  # kind -> field; "" takes a kind out
    fail_open_webhooks: str | None = None


@dataclass(frozen=True, slots=True)
class Inference:
    """How kinds are inferred from RBAC."""

    from_rbac: bool = True
    ignore: frozenset[str] = frozenset(DEFAULT_IGNORE)
    max_kinds: int = DEFAULT_MAX_KINDS


@dataclass(frozen=True, slots=True)
class Policy:
    """The merged policy in force."""

    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    min_idle_timeout: float | None = None
    max_idle_timeout: float | None = None
    rules: tuple[Rule, ...] = ()
    inference: Inference = field(default_factory=Inference)
    sources: tuple[str, ...] = ()
    keep_awake: tuple[Window, ...] = ()
    forced_sleep: tuple[Window, ...] = ()
    dry_run: bool = False
    max_sleep: float | None = DEFAULT_MAX_SLEEP  # 0: never
    due_lead: float | None = None  # None: the built-in lead, not written on workloads
    due_times: tuple[DueField, ...] = tuple(
        parse_due_field(f"{k}={v}") for k, v in BUILTIN_DUE_TIMES.items()
    )
    fail_open_webhooks: str = FAIL_OPEN_DEFAULT


@dataclass(frozen=True, slots=True)
class Effective:
    """What policy says for one workload."""

    enabled: bool
    idle_timeout: float | None
    rule: str | None = None
    watched_kinds: tuple[str, ...] | None = None
    owned_kinds: tuple[str, ...] | None = None
    keep_awake: tuple[Window, ...] = ()
    forced_sleep: tuple[Window, ...] = ()
    dry_run: bool = False
    max_sleep: float | None = None  # None or 0: none written
    due_lead: float | None = None
    due_times: tuple[DueField, ...] = ()
    fail_open_webhooks: str = FAIL_OPEN_DEFAULT


DEFAULT_POLICY = Policy()


def parse_policy(text: str, source: str) -> PolicyDocument:
    """Parse one `policy.yaml`; raise PolicyError listing every problem found."""
    if len(text) > _MAX_TEXT:
        raise PolicyError([f"{source}: policy.yaml is {len(text)} characters, over {_MAX_TEXT}"])
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise PolicyError([f"{source}: policy.yaml is not valid YAML{where}"]) from e
    if data is None:
        return PolicyDocument(source=source)
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise PolicyError(
            [f"{source}: policy.yaml must be a map with keys {', '.join(_TOP_FIELDS)}"]
        )
    _unknown(data, _TOP_FIELDS, "", source, problems)
    defaults = _section(data, "defaults", _DEFAULT_FIELDS, source, problems)
    bounds = _section(data, "bounds", _BOUND_FIELDS, source, problems)
    inference = _section(data, "inference", _INFERENCE_FIELDS, source, problems)
    doc = PolicyDocument(
        source=source,
        idle_timeout=_timeout(
            defaults.get("idleTimeout"), "defaults.idleTimeout", source, problems
        ),
        keep_awake=_windows(
            defaults.get("keepAwake"), "keep-awake", "defaults.keepAwake", source, problems
        ),
        forced_sleep=_windows(
            defaults.get("forcedSleep"), "forced-sleep", "defaults.forcedSleep", source, problems
        ),
        dry_run=_bool(defaults.get("dryRun"), "defaults.dryRun", source, problems),
        min_idle_timeout=_timeout(
            bounds.get("minIdleTimeout"), "bounds.minIdleTimeout", source, problems
        ),
        max_idle_timeout=_timeout(
            bounds.get("maxIdleTimeout"), "bounds.maxIdleTimeout", source, problems
        ),
        rules=_rules(data.get("rules"), source, problems),
        from_rbac=_bool(inference.get("fromRBAC"), "inference.fromRBAC", source, problems),
        ignore=_ignore(inference.get("ignore"), source, problems),
        max_kinds=_max_kinds(inference.get("maxKinds"), source, problems),
        max_sleep=_duration(defaults.get("maxSleep"), "defaults.maxSleep", source, problems),
        due_lead=_duration(defaults.get("dueLead"), "defaults.dueLead", source, problems),
        due_times=_due_times(defaults.get("dueTimes"), source, problems),
        fail_open_webhooks=_fail_open(
            defaults.get("failOpenWebhooks"), "defaults.failOpenWebhooks", source, problems
        ),
    )
    if problems:
        raise PolicyError(problems)
    _check_bounds(doc.min_idle_timeout, doc.max_idle_timeout, source)
    return doc


def merge_policies(documents: Iterable[PolicyDocument]) -> Policy:
    """Merge documents in source-name order: later values win; rules are appended in that order."""
    docs = sorted(documents, key=lambda d: d.source)
    idle, low, high = DEFAULT_POLICY.idle_timeout, None, None
    keep: tuple[Window, ...] = ()
    forced: tuple[Window, ...] = ()
    dry_run = False
    from_rbac, ignore, max_kinds = True, frozenset(DEFAULT_IGNORE), DEFAULT_MAX_KINDS
    max_sleep, due_lead = DEFAULT_POLICY.max_sleep, DEFAULT_POLICY.due_lead
    due_times = dict(BUILTIN_DUE_TIMES)
    fail_open = FAIL_OPEN_DEFAULT
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    problems: list[str] = []
    for d in docs:
        idle = d.idle_timeout if d.idle_timeout is not None else idle
        keep = d.keep_awake if d.keep_awake is not None else keep
        forced = d.forced_sleep if d.forced_sleep is not None else forced
        dry_run = d.dry_run if d.dry_run is not None else dry_run
        low = d.min_idle_timeout if d.min_idle_timeout is not None else low
        high = d.max_idle_timeout if d.max_idle_timeout is not None else high
        from_rbac = d.from_rbac if d.from_rbac is not None else from_rbac
        ignore = frozenset(d.ignore) if d.ignore is not None else ignore
        max_kinds = d.max_kinds if d.max_kinds is not None else max_kinds
        max_sleep = d.max_sleep if d.max_sleep is not None else max_sleep
        due_lead = d.due_lead if d.due_lead is not None else due_lead
        due_times.update(d.due_times or {})
        fail_open = d.fail_open_webhooks if d.fail_open_webhooks is not None else fail_open
        for rule in d.rules:
            if rule.name in seen:
                problems.append(
                    f"{d.source}: rules: name {rule.name!r} is already used in {seen[rule.name]} "
                    "(rule names must be unique)"
                )
            seen[rule.name] = d.source
            rules.append(rule)
    if problems:
        raise PolicyError(problems)
    _check_bounds(low, high, " + ".join(d.source for d in docs) or "defaults")
    return Policy(
        idle_timeout=idle,
        min_idle_timeout=low,
        max_idle_timeout=high,
        rules=tuple(rules),
        inference=Inference(from_rbac=from_rbac, ignore=ignore, max_kinds=max_kinds),
        sources=tuple(d.source for d in docs),
        keep_awake=keep,
        forced_sleep=forced,
        dry_run=dry_run,
        max_sleep=max_sleep,
        due_lead=due_lead,
        due_times=tuple(parse_due_field(f"{k}={v}") for k, v in sorted(due_times.items()) if v),
        fail_open_webhooks=fail_open,
    )


def evaluate_policy(
    policy: Policy, namespace_labels: Mapping[str, str], workload_labels: Mapping[str, str]
) -> Effective:
    """The settings for a workload: the first matching rule's fields over the defaults."""
    for rule in policy.rules:
        if rule.matches(namespace_labels, workload_labels):
            return Effective(
                enabled=rule.enabled if rule.enabled is not None else True,
                idle_timeout=rule.idle_timeout
                if rule.idle_timeout is not None
                else policy.idle_timeout,
                rule=rule.name,
                watched_kinds=rule.watched_kinds,
                owned_kinds=rule.owned_kinds,
                keep_awake=rule.keep_awake if rule.keep_awake is not None else policy.keep_awake,
                forced_sleep=rule.forced_sleep
                if rule.forced_sleep is not None
                else policy.forced_sleep,
                dry_run=rule.dry_run if rule.dry_run is not None else policy.dry_run,
                max_sleep=rule.max_sleep if rule.max_sleep is not None else policy.max_sleep,
                due_lead=rule.due_lead if rule.due_lead is not None else policy.due_lead,
                due_times=policy.due_times,
                fail_open_webhooks=rule.fail_open_webhooks or policy.fail_open_webhooks,
            )
    return Effective(
        enabled=True,
        idle_timeout=policy.idle_timeout,
        max_sleep=policy.max_sleep,
        due_lead=policy.due_lead,
        due_times=policy.due_times,
        fail_open_webhooks=policy.fail_open_webhooks,
        keep_awake=policy.keep_awake,
        forced_sleep=policy.forced_sleep,
        dry_run=policy.dry_run,
    )


def dry_run_reason(
    policy: Policy | None, namespace_labels: Mapping[str, str], workload_labels: Mapping[str, str]
) -> str | None:
    """Why zeroscaler only says what it would do for a workload (its namespace's label, or the
    policy), or None when it acts."""
    if namespace_labels.get(NAMESPACE_DRY_RUN_LABEL) == "true":
        return f'namespace labelled {NAMESPACE_DRY_RUN_LABEL}: "true"'
    if policy is None:
        return None
    effective = evaluate_policy(policy, namespace_labels, workload_labels)
    if not effective.dry_run:
        return None
    return f"policy rule {effective.rule!r}" if effective.rule else "policy defaults.dryRun"


def clamp_idle_timeout(policy: Policy, seconds: float) -> tuple[float, str | None]:
    """The timeout within the policy's bounds, and a message when it had to move."""
    low, high = policy.min_idle_timeout, policy.max_idle_timeout
    if low is not None and seconds < low:
        return low, (
            f"idle timeout {format_duration(seconds)} is below the policy minimum "
            f"{format_duration(low)}; {format_duration(low)} applies"
        )
    if high is not None and seconds > high:
        return high, (
            f"idle timeout {format_duration(seconds)} is above the policy maximum "
            f"{format_duration(high)}; {format_duration(high)} applies"
        )
    return seconds, None


def _check_bounds(low: float | None, high: float | None, source: str) -> None:
    if low is not None and high is not None and low > high:
        raise PolicyError(
            [
                f"{source}: bounds.minIdleTimeout ({format_duration(low)}) is above "
                f"bounds.maxIdleTimeout ({format_duration(high)}); expected min <= max"
            ]
        )


def _unknown(
    data: Mapping[Any, Any], allowed: Sequence[str], where: str, source: str, problems: list[str]
) -> None:
    for key in data:
        if key not in allowed:
            problems.append(
                f"{source}: {where}{key}: unknown field (expected one of {', '.join(allowed)})"
            )


def _section(
    data: Mapping[Any, Any], name: str, allowed: Sequence[str], source: str, problems: list[str]
) -> Mapping[Any, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{source}: {name}: expected a map with keys {', '.join(allowed)}")
        return {}
    _unknown(value, allowed, f"{name}.", source, problems)
    return value


def _timeout(value: object, where: str, source: str, problems: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        problems.append(f"{source}: {where}: expected {DURATION_FORM}")
        return None
    try:
        seconds = parse_duration(str(value))
    except DurationError as e:
        problems.append(f"{source}: {where}: {e}")
        return None
    if seconds <= 0:
        problems.append(f"{source}: {where}: {value!r} must be longer than zero ({DURATION_FORM})")
        return None
    return seconds


def _duration(value: object, where: str, source: str, problems: list[str]) -> float | None:
    """A duration that may be zero (max-sleep 0: never; lead 0: at the due time itself)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        problems.append(f"{source}: {where}: expected {DURATION_FORM}")
        return None
    try:
        return parse_duration(str(value))
    except DurationError as e:
        problems.append(f"{source}: {where}: {e}")
        return None


def _due_times(value: object, source: str, problems: list[str]) -> dict[str, str] | None:
    where = "defaults.dueTimes"
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.append(
            f"{source}: {where}: expected a map of Kind.group to a field path "
            '(e.g. {Certificate.cert-manager.io: status.renewalTime}; "" takes a kind out)'
        )
        return None
    table: dict[str, str] = {}
    for kind, path in value.items():
        if path is None or path == "":
            table[str(kind)] = ""
            continue
        try:
            parsed = parse_due_field(f"{kind}={path}")
        except ValueError as e:
            problems.append(f"{source}: {where}: {e}")
            continue
        table[parsed.kind.text] = parsed.field
    return table


def _bool(value: object, where: str, source: str, problems: list[str]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    problems.append(f"{source}: {where}: {value!r} is not true or false")
    return None


def _ignore(value: object, source: str, problems: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        problems.append(
            f"{source}: inference.ignore: expected a list of resource or resource.group names "
            "(e.g. [events, leases.coordination.k8s.io])"
        )
        return None
    return tuple(v.strip() for v in value)


def _max_kinds(value: object, source: str, problems: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.append(f"{source}: inference.maxKinds: {value!r} is not a whole number, 1 or more")
        return None
    return value


def _kinds(value: object, where: str, source: str, problems: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    items: list[str]
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = value
    else:
        problems.append(f"{source}: {where}: expected a list of kind references ({KIND_REF_FORM})")
        return None
    refs, errors = parse_kind_refs(",".join(items))
    problems.extend(f"{source}: {where}: {e}" for e in errors)
    return tuple(r.text for r in refs)


def _rules(value: object, source: str, problems: list[str]) -> tuple[Rule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{source}: rules: expected a list of rules")
        return ()
    rules: list[Rule] = []
    names: set[str] = set()
    for i, item in enumerate(value):
        where = f"rules[{i}]"
        if not isinstance(item, Mapping):
            problems.append(
                f"{source}: {where}: expected a map with keys {', '.join(_RULE_FIELDS)}"
            )
            continue
        _unknown(item, _RULE_FIELDS, f"{where}.", source, problems)
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            problems.append(
                f"{source}: {where}.name: {name!r} is not a non-empty string naming the rule "
                "(quote names such as off, yes, 1)"
            )
            name = where
        elif name in names:
            problems.append(
                f"{source}: {where}.name: {name!r} is used twice (names must be unique)"
            )
        names.add(name)
        selectors: list[Selector] = []
        for key in ("namespaceSelector", "workloadSelector"):
            try:
                selectors.append(parse_selector(item.get(key), f"{where}.{key}"))
            except SelectorError as e:
                problems.append(f"{source}: {e}")
                selectors.append(EVERYTHING)
        rules.append(
            Rule(
                name=name,
                source=source,
                namespace_selector=selectors[0],
                workload_selector=selectors[1],
                idle_timeout=_timeout(
                    item.get("idleTimeout"), f"{where}.idleTimeout", source, problems
                ),
                enabled=_bool(item.get("enabled"), f"{where}.enabled", source, problems),
                watched_kinds=_kinds(
                    item.get("watchedKinds"), f"{where}.watchedKinds", source, problems
                ),
                owned_kinds=_kinds(item.get("ownedKinds"), f"{where}.ownedKinds", source, problems),
                keep_awake=_windows(
                    item.get("keepAwake"), "keep-awake", f"{where}.keepAwake", source, problems
                ),
                forced_sleep=_windows(
                    item.get("forcedSleep"),
                    "forced-sleep",
                    f"{where}.forcedSleep",
                    source,
                    problems,
                ),
                dry_run=_bool(item.get("dryRun"), f"{where}.dryRun", source, problems),
                max_sleep=_duration(item.get("maxSleep"), f"{where}.maxSleep", source, problems),
                due_lead=_duration(item.get("dueLead"), f"{where}.dueLead", source, problems),
                fail_open_webhooks=_fail_open(
                    item.get("failOpenWebhooks"), f"{where}.failOpenWebhooks", source, problems
                ),
            )
        )
    return tuple(rules)


def _windows(
    value: object, kind: WindowKind, where: str, source: str, problems: list[str]
) -> tuple[Window, ...] | None:
    """A list of windows, each the annotation's text or a map; an empty list means none."""
    if value is None:
        return None
    items: list[object] = [value] if isinstance(value, str | Mapping) else value  # type: ignore[assignment]
    if not isinstance(items, list):
        expected = f"each {WINDOW_FORM} or {_WINDOW_MAP_FORM}"
        problems.append(f"{source}: {where}: expected a list of windows, {expected}")
        return None
    windows: list[Window] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        try:
            if isinstance(item, str):
                windows.extend(parse_windows(item, kind))
            elif isinstance(item, Mapping):
                windows.append(_window_map(item, kind, at, source, problems))
            else:
                problems.append(f"{source}: {at}: expected {WINDOW_FORM} or {_WINDOW_MAP_FORM}")
        except WindowError as e:
            problems.append(f"{source}: {at}: {e}")
    if len(windows) > MAX_WINDOWS:
        problems.append(f"{source}: {where}: {len(windows)} windows, over {MAX_WINDOWS}")
    return tuple(windows)


def _window_map(
    item: Mapping[Any, Any], kind: WindowKind, where: str, source: str, problems: list[str]
) -> Window:
    _unknown(item, _WINDOW_FIELDS, f"{where}.", source, problems)
    texts: dict[str, str] = {}
    for key in ("days", "start", "end", "timeZone"):
        value = item.get(key)
        if key in ("start", "end") and isinstance(value, int) and not isinstance(value, bool):
            # YAML 1.1 reads an unquoted 20:00 as sixty-based 1200: read back as the time.
            value = f"{value // 60:02d}:{value % 60:02d}"
        if not isinstance(value, str) or not value.strip():
            raise WindowError(
                f"{key}: {value!r} is missing or not text; expected {_WINDOW_MAP_FORM}"
            )
        texts[key] = value.strip()
    dates = item.get("except") or []
    dates = [dates] if isinstance(dates, str) else dates
    # YAML reads an unquoted 2026-12-24 as a date: taken as written.
    if not isinstance(dates, list) or not all(isinstance(d, str | date) for d in dates):
        raise WindowError(f"except: expected a list of dates YYYY-MM-DD, not {dates!r}")
    activity = item.get("activity", "wake")
    if not isinstance(activity, str):
        raise WindowError(f"activity: {activity!r} is not wake or hold")
    try:
        return make_window(
            kind,
            days=texts["days"],
            start=texts["start"],
            end=texts["end"],
            zone=texts["timeZone"],
            exceptions=[str(d) for d in dates],
            activity=activity,
        )
    except WindowError as e:
        raise WindowError(f"{e}; expected {_WINDOW_MAP_FORM}") from None


def _fail_open(value: object, where: str, source: str, problems: list[str]) -> str | None:
    if value is None or value in FAIL_OPEN_CHOICES:
        return None if value is None else str(value)
    problems.append(
        f"{source}: {where}: {value!r} is not one of {', '.join(FAIL_OPEN_CHOICES)} (stayAwake: "
        "a backend of a failurePolicy Ignore webhook is never put to sleep; sleep: it may be)"
    )
    return None
