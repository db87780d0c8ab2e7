"""Whether an admission webhook is called for a request, decided as the API server decides it.

A webhook is called when one of its `rules` matches the request's operation, group, version,
resource and subresource and scope, its `namespaceSelector` matches the labels of the request's
namespace (of the Namespace itself when that is the object; not at all for other cluster-scoped
objects), and its `objectSelector` matches the labels of the object or of the old object.

Labels are not always known in advance (a pod's `pod-template-hash`, a ConfigMap zeroscaler has
not read), so the answer is three-valued: `yes`, `no`, or `maybe` when it turns on what is not
known. `matchConditions` (CEL) are not evaluated: they can only narrow a match, so one that
would otherwise be `yes` is `maybe`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from zeroscaler.core.selectors import Requirement, Selector, SelectorError, parse_selector

Verdict = Literal["yes", "no", "maybe"]
# A label's value, or None when the key is there but its value is not known in advance.
LabelValues = Mapping[str, str | None]
NAMESPACES = ("", "namespaces")  # group, resource of the Namespace object


@dataclass(frozen=True, slots=True)
class Attributes:
    """One admission request as a webhook's rules and selectors see it."""

    operation: str  # CREATE, UPDATE, DELETE or CONNECT
    group: str
    version: str
    resource: str
    subresource: str = ""
    namespace: str = ""  # "" for cluster-scoped objects; a Namespace's own name for it
    object_labels: LabelValues | None = None  # None: no object (a DELETE's, say)
    old_labels: LabelValues | None = None  # None: no old object (a CREATE's)
    labels_known: bool = True  # False: the objects' labels cannot be known in advance
    namespace_labels: LabelValues | None = None  # None: not known

    @property
    def is_namespace(self) -> bool:
        return (self.group, self.resource) == NAMESPACES and not self.subresource


@dataclass(frozen=True, slots=True)
class Match:
    """A verdict and, when it is not `no`, the rule and the reason it holds."""

    verdict: Verdict
    rule: str = ""
    why: str = ""


NO = Match("no")


def webhook_matches(webhook: Mapping[str, Any], request: Attributes) -> Match:
    """Whether the API server would call `webhook` (a webhook entry, or its match fields) for
    `request`."""
    rule = next((r for r in _list(webhook.get("rules")) if rule_matches(r, request, webhook)), None)
    if rule is None:
        return NO
    words = rule_words(rule)
    verdict = _and(
        _namespace_verdict(webhook.get("namespaceSelector"), request),
        _object_verdict(webhook.get("objectSelector"), request),
    )
    if verdict == "no":
        return NO
    if verdict == "maybe":
        return Match("maybe", words, "its selectors may match labels not known in advance")
    if _list(webhook.get("matchConditions")):
        return Match("maybe", words, "its matchConditions are not evaluated")
    return Match("yes", words)


def rule_matches(
    rule: Mapping[str, Any], request: Attributes, webhook: Mapping[str, Any] | None = None
) -> bool:
    """Whether one `rules` entry covers the request (as `k8s.io/apiserver`'s rule matcher)."""
    if not isinstance(rule, Mapping):
        return False
    exact = (webhook or {}).get("matchPolicy") == "Exact"
    return (
        _scope_matches(rule.get("scope"), request)
        and _listed(rule.get("operations"), request.operation)
        and _listed(rule.get("apiGroups"), request.group)
        # Equivalent (the default) also calls it for the same resource at another version.
        and (not exact or _listed(rule.get("apiVersions"), request.version))
        and any(_resource_matches(r, request) for r in _list(rule.get("resources")))
    )


def rule_words(rule: Mapping[str, Any]) -> str:
    """A rule as a user reads it: `CREATE,UPDATE pods,pods/* in apps,""`."""
    ops = ",".join(map(str, _list(rule.get("operations")))) or "(no operations)"
    resources = ",".join(map(str, _list(rule.get("resources")))) or "(no resources)"
    groups = ",".join(json.dumps(str(g)) for g in _list(rule.get("apiGroups")))
    return f"{ops} {resources} in groups {groups or '(none)'}"


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _listed(items: object, value: str) -> bool:
    return any(item in ("*", value) for item in _list(items))


def _scope_matches(scope: object, request: Attributes) -> bool:
    if scope in (None, "*"):
        return True
    if scope == "Namespaced":
        return not request.is_namespace and request.namespace != ""
    if scope == "Cluster":
        return request.is_namespace or request.namespace == ""
    return False


def _resource_matches(entry: object, request: Attributes) -> bool:
    # `pods` is the resource alone, `pods/*` the resource and every subresource, `*/scale` the
    # scale subresource of any resource, `*/*` everything (as the API server splits them).
    resource, _, sub = str(entry).partition("/")
    return resource in ("*", request.resource) and sub in ("*", request.subresource)


def _namespace_verdict(selector: object, request: Attributes) -> Verdict:
    if request.namespace == "" and not request.is_namespace:
        return "yes"  # other cluster-scoped objects are never skipped by it
    if request.is_namespace and request.operation in ("CREATE", "UPDATE"):
        labels = request.object_labels if request.labels_known else None
    else:
        labels = request.namespace_labels
    return selector_verdict(selector, labels)


def _object_verdict(selector: object, request: Attributes) -> Verdict:
    parsed = _parsed(selector)
    if parsed is None:
        return "maybe"
    if not parsed.match_labels and not parsed.match_expressions:
        return "yes"
    if not request.labels_known:
        return "maybe"
    verdicts = [
        _selector_verdict(parsed, labels)
        for labels in (request.object_labels, request.old_labels)
        if labels is not None
    ]
    return _or(verdicts) if verdicts else "no"


def selector_verdict(selector: object, labels: LabelValues | None) -> Verdict:
    """Whether a label selector (as decoded JSON) matches `labels`; None labels are not known."""
    parsed = _parsed(selector)
    if parsed is None:
        return "maybe"
    if not parsed.match_labels and not parsed.match_expressions:
        return "yes"
    if labels is None:
        return "maybe"
    return _selector_verdict(parsed, labels)


def _parsed(selector: object) -> Selector | None:
    """The selector, or None when it is not one the API server would have taken."""
    try:
        return parse_selector(selector, "selector")
    except SelectorError:
        return None


def _selector_verdict(selector: Selector, labels: LabelValues) -> Verdict:
    verdicts: list[Verdict] = [
        _requirement_verdict(Requirement(k, "In", frozenset({v})), labels)
        for k, v in selector.match_labels
    ]
    verdicts += [_requirement_verdict(r, labels) for r in selector.match_expressions]
    return _and(*verdicts)


def _requirement_verdict(req: Requirement, labels: LabelValues) -> Verdict:
    if req.key not in labels:
        return "no" if req.operator in ("In", "Exists") else "yes"
    if req.operator == "Exists":
        return "yes"
    if req.operator == "DoesNotExist":
        return "no"
    value = labels[req.key]
    if value is None:
        return "maybe"
    found = value in req.values
    return "yes" if found == (req.operator == "In") else "no"


def _and(*verdicts: Verdict) -> Verdict:
    if "no" in verdicts:
        return "no"
    return "maybe" if "maybe" in verdicts else "yes"


def _or(verdicts: Iterable[Verdict]) -> Verdict:
    found = set(verdicts)
    if "yes" in found:
        return "yes"
    return "maybe" if "maybe" in found else "no"
