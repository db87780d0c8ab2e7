"""Does RBAC let a ServiceAccount do a verb on a resource? Kubernetes' RBAC rules on a snapshot."""

from __future__ import annotations

from dataclasses import dataclass

from zeroscaler.core.inference import PolicyRule, RBACSnapshot

_MEMO_SIZE = 65_536
EVERYWHERE = ""  # the namespace of a request for every namespace, or for a cluster-scoped type


@dataclass(frozen=True, slots=True)
class Request:
    """One request's resource attributes, as a SubjectAccessReview carries them."""

    verb: str
    group: str
    resource: str  # `plural`, or `plural/subresource`
    namespace: str = EVERYWHERE
    name: str = ""


def rbac_allows(rbac: RBACSnapshot, namespace: str, service_account: str, request: Request) -> bool:
    """Whether a RoleBinding or ClusterRoleBinding in `rbac` grants the ServiceAccount `request`."""
    key = (namespace, service_account, request)
    answer = rbac._allowed.get(key)
    if answer is None:
        answer = any(
            _rule_allows(rule, request)
            for where, rules in _grants(rbac, namespace, service_account)
            if where == EVERYWHERE or where == request.namespace
            for rule in rules
        )
        if len(rbac._allowed) >= _MEMO_SIZE:
            rbac._allowed.clear()
        rbac._allowed[key] = answer
    return answer


def _grants(
    rbac: RBACSnapshot, namespace: str, service_account: str
) -> tuple[tuple[str, tuple[PolicyRule, ...]], ...]:
    """Per binding of the account: where it grants ("" everywhere) and its roles' rules."""
    key = (namespace, service_account)
    found = rbac._grants.get(key)
    if found is None:
        pairs = []
        for binding in rbac.bindings_for(namespace, service_account):
            rules = rbac.rules_of(binding)
            if rules:  # a missing role grants nothing
                pairs.append((binding.namespace, rules))
        found = tuple(pairs)
        if len(rbac._grants) >= _MEMO_SIZE:
            rbac._grants.clear()
        rbac._grants[key] = found
    return found


def _rule_allows(rule: PolicyRule, request: Request) -> bool:
    """Kubernetes' match of one rule: verb, API group, resource and, where named, the name."""
    return (
        any(v == "*" or v == request.verb for v in rule.verbs)
        and any(g == "*" or g == request.group for g in rule.api_groups)
        and _resource_matches(rule.resources, request.resource)
        and (not rule.resource_names or request.name in rule.resource_names)
    )


def _resource_matches(resources: tuple[str, ...], requested: str) -> bool:
    _, _, subresource = requested.partition("/")
    for resource in resources:
        if resource == "*" or resource == requested:
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False
