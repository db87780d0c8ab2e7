"""The webhook's brain: from an admission request, policy and RBAC, the annotations to add."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import jsonpatch

from zeroscaler.core import annotations as a
from zeroscaler.core.due import format_due_fields
from zeroscaler.core.durations import format_duration
from zeroscaler.core.inference import Inferred, RBACSnapshot, infer_kinds
from zeroscaler.core.kinds import Discovery, KindRefError, parse_kind_ref
from zeroscaler.core.policy import (
    Effective,
    Policy,
    clamp_idle_timeout,
    dry_run_reason,
    evaluate_policy,
)
from zeroscaler.core.schedules import format_windows

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet"})
MAX_WARNING = 240  # the API server truncates longer warnings
# Never mutated, whatever their labels say (the webhook adds its own namespace to these).
EXCLUDED_NAMESPACES = frozenset({"kube-system"})


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]


class AdmissionRequest(TypedDict, total=False):
    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    requestKind: GroupVersionKind
    requestResource: GroupVersionResource
    name: str
    namespace: str
    operation: Operation
    userInfo: UserInfo
    object: dict[str, Any] | None
    oldObject: dict[str, Any] | None
    dryRun: bool
    options: dict[str, Any] | None


class AdmissionResponse(TypedDict, total=False):
    uid: str
    allowed: bool
    patch: str
    patchType: Literal["JSONPatch"]
    warnings: list[str]


class AdmissionReview(TypedDict, total=False):
    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse


@dataclass(frozen=True, slots=True)
class PatchDecision:
    """JSONPatch operations (empty: leave the object alone), warnings, and why."""

    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    reason: str = ""


def decide_patch(
    request: AdmissionRequest,
    policy: Policy,
    rbac: RBACSnapshot,
    discovery: Discovery,
    *,
    namespace_labels: Mapping[str, str] | None,
    custom_resources: Collection[str] | None = None,
    excluded_namespaces: Collection[str] = EXCLUDED_NAMESPACES,
) -> PatchDecision:
    """The patch that adds missing zeroscaler annotations to a Deployment or StatefulSet."""
    kind = request.get("kind")
    if (
        not isinstance(kind, dict)
        or request.get("operation") not in ("CREATE", "UPDATE")
        or request.get("subResource")
        or kind.get("group") != "apps"
        or kind.get("kind") not in WORKLOAD_KINDS
    ):
        return PatchDecision(reason="not a create or update of an apps Deployment or StatefulSet")
    namespace = request.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        return PatchDecision(reason="no namespace in the request")
    if namespace in excluded_namespaces:
        return PatchDecision(reason=f"namespace {namespace} is excluded from mutation")
    if namespace_labels is not None and namespace_labels.get(a.NAMESPACE_ENABLED_LABEL) != "true":
        return PatchDecision(reason=f"namespace {namespace} is not opted in")
    obj = request.get("object")
    if not isinstance(obj, dict):
        return PatchDecision(reason="no object in the request")
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    dry_run = dry_run_reason(
        policy, namespace_labels or {}, labels if isinstance(labels, dict) else {}
    )
    if dry_run is not None:  # the controller says what it would write; nothing is written
        return PatchDecision(reason=f"dry run ({dry_run})")
    taken = taken_over(request) if request.get("operation") == "UPDATE" else frozenset()
    result = annotate_from_policy(
        obj,
        namespace,
        policy,
        rbac,
        discovery,
        namespace_labels=namespace_labels or {},
        custom_resources=custom_resources,
        taken_over=taken,
    )
    warnings = (*result.problems, *result.warnings)
    if not result.changes:
        return PatchDecision(warnings=warnings, reason=result.reason)
    current = dict((obj.get("metadata") or {}).get("annotations") or {})
    return PatchDecision(
        patch=_patch(obj, current, result.changes), warnings=warnings, reason="added"
    )


@dataclass(frozen=True, slots=True)
class Annotating:
    """The annotation changes policy asks for (None removes a key), with warnings and why."""

    changes: dict[str, str | None] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # malformed annotations, as messages
    reason: str = ""


def annotate_from_policy(
    obj: Mapping[str, Any],
    namespace: str,
    policy: Policy,
    rbac: RBACSnapshot,
    discovery: Discovery,
    *,
    namespace_labels: Mapping[str, str],
    custom_resources: Collection[str] | None = None,
    taken_over: Collection[str] = (),
) -> Annotating:
    """What policy and RBAC give a workload: missing keys added, keys listed as injected kept
    equal to policy (or removed when it no longer gives them), a person's keys never touched.

    `taken_over` are injected keys a person has just written a value for: theirs from now on.
    """
    meta = obj.get("metadata", {})
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    bad = _bad_map(meta, "metadata") or _bad_map(annotations, "metadata.annotations")
    bad = bad or _bad_map(labels, "metadata.labels")
    if bad:
        return Annotating(warnings=(f"zeroscaler left the object alone: {bad}",), reason=bad)
    written: dict[str, str] = dict(annotations or {})
    listed = a.read_injected(written)
    ours = [k for k in listed if k in a.POLICY_KEYS and k not in taken_over]
    # Keys policy wrote are looked at as if absent, so they follow the policy in force now.
    current = {k: v for k, v in written.items() if k not in ours}
    config, found = a.read_config(current)
    problems = tuple(_cut(str(p)) for p in found)
    if config.opted_out:
        return Annotating(problems=problems, reason=f"opted out by {a.ENABLED}")
    warnings: list[str] = []
    effective = evaluate_policy(policy, namespace_labels, labels or {})
    clamped: set[str] = set()
    if not effective.enabled:
        updates: dict[str, str] = {}
        reason = f"excluded by policy rule {effective.rule!r}"
    else:
        updates = _timeout_updates(current, config, policy, effective, warnings)
        # A person's timeout clamped into bounds stays theirs: not listed, never replaced.
        clamped = set(updates) if config.idle_timeout is not None else set()
        updates.update(
            _kind_updates(
                obj, current, namespace, policy, effective, rbac, discovery, custom_resources,
                warnings,
            )
        )  # fmt: skip
        updates.update(_window_updates(current, effective))
        updates.update(_clock_updates(current, updates, effective, discovery))
        reason = "nothing to add"
    changes: dict[str, str | None] = {
        k: v for k, v in sorted(updates.items()) if written.get(k) != v
    }
    changes.update({k: None for k in ours if k not in updates and k in written})
    owned = sorted(k for k in updates if k not in clamped)
    kept = [k for k in listed if k not in a.POLICY_KEYS or k in owned]
    injected = ",".join(dict.fromkeys([*kept, *owned]))
    if injected != written.get(a.INJECTED, "") and (injected or a.INJECTED in written):
        changes[a.INJECTED] = injected or None
    if changes:
        reason = "policy applied"
    return Annotating(changes, tuple(warnings), problems, reason)


def taken_over(request: AdmissionRequest) -> frozenset[str]:
    """Injected keys whose value this update changes, unless zeroscaler itself writes them."""
    options = request.get("options") or {}
    if options.get("fieldManager") == a.FIELD_MANAGER:
        return frozenset()
    old, new = _annotations_of(request.get("oldObject")), _annotations_of(request.get("object"))
    listed = a.read_injected(old)
    return frozenset(k for k in listed if k in old and old.get(k) != new.get(k))


def _annotations_of(obj: object) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    found = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def _timeout_updates(
    current: Mapping[str, str],
    config: a.WorkloadConfig,
    policy: Policy,
    effective: Effective,
    warnings: list[str],
) -> dict[str, str]:
    """The policy timeout where none was written; a written one only when out of bounds."""
    if config.idle_timeout is not None:
        seconds, moved = clamp_idle_timeout(policy, config.idle_timeout)
        if not moved:
            return {}
        warnings.append(_cut(f"{a.IDLE_TIMEOUT}: {moved}"))
        return {a.IDLE_TIMEOUT: format_duration(seconds)}
    written = a.IDLE_TIMEOUT in current or any(k in current for k in a.IBM_IDLE_TIMEOUT)
    if written or effective.idle_timeout is None:
        return {}  # an invalid written value was reported already and is not ours to replace
    seconds, moved = clamp_idle_timeout(policy, effective.idle_timeout)
    if moved:
        warnings.append(_cut(f"policy {a.IDLE_TIMEOUT}: {moved}"))
    return {a.IDLE_TIMEOUT: format_duration(seconds)}


def _window_updates(current: Mapping[str, str], effective: Effective) -> dict[str, str]:
    """The policy's windows of each kind where the workload has none of its own."""
    updates: dict[str, str] = {}
    for key, windows in (
        (a.KEEP_AWAKE, effective.keep_awake),
        (a.FORCED_SLEEP, effective.forced_sleep),
    ):
        if windows and key not in current:
            updates[key] = format_windows(windows)
    return updates


def _kind_updates(
    obj: Mapping[str, Any],
    current: Mapping[str, str],
    namespace: str,
    policy: Policy,
    effective: Effective,
    rbac: RBACSnapshot,
    discovery: Discovery,
    custom_resources: Collection[str] | None,
    warnings: list[str],
) -> dict[str, str]:
    """Watched and owned kinds where absent: named by the policy rule, else inferred from RBAC."""
    updates: dict[str, str] = {}
    inferred: Inferred | None = None
    for key, ibm_key, named in (
        (a.WATCHED_KINDS, a.IBM_WATCHED_KINDS, effective.watched_kinds),
        (a.OWNED_KINDS, a.IBM_OWNED_KINDS, effective.owned_kinds),
    ):
        if key in current or ibm_key in current:
            continue
        kinds: list[str] = []
        if named is not None:
            kinds = _canonical(named, discovery, key, warnings)
        elif policy.inference.from_rbac:
            if inferred is None:
                inferred = _infer(obj, namespace, policy, rbac, discovery, custom_resources)
                warnings.extend(_cut(w) for w in inferred.warnings)
            kinds = list(inferred.watched if key == a.WATCHED_KINDS else inferred.owned)
            if kinds and a.WATCH_NAMESPACES not in current and inferred.namespaces:
                updates[a.WATCH_NAMESPACES] = ",".join(inferred.namespaces)
        if kinds:
            updates[key] = ",".join(kinds)
    return updates


def _clock_updates(
    current: Mapping[str, str],
    updates: Mapping[str, str],
    effective: Effective,
    discovery: Discovery,
) -> dict[str, str]:
    """max-sleep where none was written; the policy's due times of the kinds it watches (and
    their lead) where none were."""
    found: dict[str, str] = {}
    if a.MAX_SLEEP not in current and effective.max_sleep:
        found[a.MAX_SLEEP] = format_duration(effective.max_sleep)
    if a.DUE_TIMES in current or not effective.due_times:
        return found
    watched_text = updates.get(a.WATCHED_KINDS, current.get(a.WATCHED_KINDS, ""))
    watched = {_resolved(text, discovery) for text in watched_text.split(",") if text.strip()}
    due = [d for d in effective.due_times if _resolved(d.kind.text, discovery) in watched]
    if due:
        found[a.DUE_TIMES] = format_due_fields(due)
        if effective.due_lead is not None and a.DUE_LEAD not in current:
            found[a.DUE_LEAD] = format_duration(effective.due_lead)
    return found


def _resolved(text: str, discovery: Discovery) -> str:
    """A kind reference as the API server serves it (`Kind.group`), or as written if it is not."""
    try:
        api = discovery.resolve(parse_kind_ref(text))
    except KindRefError:
        return text.strip()
    return api.canonical if api is not None else text.strip()


def _patch(
    obj: Mapping[str, Any], current: dict[str, str], changes: Mapping[str, str | None]
) -> list[Any]:
    """JSONPatch ops making `changes` (None removes), touching nothing else; absent maps made."""
    meta = obj.get("metadata")
    after = {k: v for k, v in {**current, **changes}.items() if v is not None}
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        before = {k: current[k] for k in changes if k in current}
        wanted = {k: after[k] for k in changes if k in after}
        ops = jsonpatch.make_patch(before, wanted)
        return [{**op, "path": "/metadata/annotations" + op["path"]} for op in ops]
    source: dict[str, Any]
    if "metadata" not in obj:
        source = {}
    elif not isinstance(meta, dict):
        source = {"metadata": None}
    elif "annotations" in meta:
        source = {"metadata": {"annotations": None}}
    else:
        source = {"metadata": {}}
    return list(jsonpatch.make_patch(source, {"metadata": {"annotations": after}}))


def service_account_of(obj: Mapping[str, Any]) -> str | None:
    """The pod template's ServiceAccount (`default` when unset); None when malformed."""
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    if pod is None:
        return "default"
    if not isinstance(pod, dict):
        return None
    for key in ("serviceAccountName", "serviceAccount"):  # the second is the deprecated alias
        value = pod.get(key)
        if value is None or value == "":
            continue
        return value if isinstance(value, str) else None
    return "default"


def _infer(
    obj: Mapping[str, Any],
    namespace: str,
    policy: Policy,
    rbac: RBACSnapshot,
    discovery: Discovery,
    custom_resources: Collection[str] | None,
) -> Inferred:
    account = service_account_of(obj)
    if account is None:
        return Inferred(
            warnings=("spec.template.spec.serviceAccountName is not a string; no kinds inferred",)
        )
    return infer_kinds(
        rbac,
        namespace,
        account,
        discovery,
        ignore=policy.inference.ignore,
        max_kinds=policy.inference.max_kinds,
        custom_resources=custom_resources,
    )


def _canonical(
    texts: tuple[str, ...], discovery: Discovery, key: str, warnings: list[str]
) -> list[str]:
    out: list[str] = []
    for text in texts:
        try:
            api = discovery.resolve(parse_kind_ref(text))
        except KindRefError:
            api = None
        if api is None:
            warnings.append(
                _cut(f"{key}: policy names {text}, which the API server does not serve yet")
            )
            out.append(text)
        else:
            out.append(api.canonical)
    return sorted(dict.fromkeys(out))


def _bad_map(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"{where} is not a map"
    if where != "metadata" and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return f"{where} is not a map of strings to strings"
    return None


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WARNING else text[: MAX_WARNING - 1] + "…"
