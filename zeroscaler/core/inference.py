"""Infer the kinds a workload watches and owns from the RBAC its ServiceAccount holds."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from zeroscaler.core.annotations import WATCHED_KINDS
from zeroscaler.core.kinds import APIResource, Discovery
from zeroscaler.core.selectors import Selector, SelectorError, parse_selector

RoleKind = Literal["Role", "ClusterRole"]
ALL_NAMESPACES = "*"
DEFAULTS_LABEL = (
    "kubernetes.io/bootstrapping"  # "rbac-defaults" on the RBAC Kubernetes makes itself
)
_MAX_LISTED = 6  # names listed in one warning before "and N more"
_MEMO_SIZE = 4096


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One RBAC rule."""

    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    verbs: frozenset[str] = frozenset()
    resource_names: tuple[str, ...] = ()

    # Verbs are kept as written (authorization matches them exactly); inference reads any case.
    @property
    def can_watch(self) -> bool:
        return any(v == "*" or v.lower() == "watch" for v in self.verbs)

    @property
    def can_create(self) -> bool:
        return any(v == "*" or v.lower() == "create" for v in self.verbs)


@dataclass(frozen=True, slots=True)
class Role:
    """A Role (namespace set) or ClusterRole (namespace ""), with its aggregation selectors."""

    name: str
    namespace: str = ""
    rules: tuple[PolicyRule, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    aggregation: tuple[Selector, ...] = ()


@dataclass(frozen=True, slots=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""


@dataclass(frozen=True, slots=True)
class Binding:
    """A RoleBinding (namespace set) or ClusterRoleBinding (namespace "")."""

    name: str
    namespace: str
    role_kind: RoleKind
    role_name: str
    subjects: tuple[Subject, ...] = ()
    is_default: bool = False  # one of Kubernetes' own (labelled kubernetes.io/bootstrapping)

    @property
    def scope(self) -> str:
        return self.namespace or ALL_NAMESPACES

    @property
    def label(self) -> str:
        kind = "RoleBinding" if self.namespace else "ClusterRoleBinding"
        return f"{kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


class RBACSnapshot:
    """Roles and bindings at one moment, indexed by subject for quick lookup."""

    def __init__(self, roles: Iterable[Role] = (), bindings: Iterable[Binding] = ()) -> None:
        self.roles: dict[tuple[str, str], Role] = {(r.namespace, r.name): r for r in roles}
        self.bindings: tuple[Binding, ...] = tuple(bindings)
        self._by_subject: dict[tuple[str, str, str], list[Binding]] = {}
        # Results per account: the snapshot never changes, so only discovery and options vary.
        self._memo: dict[tuple[object, ...], tuple[Discovery, Inferred]] = {}
        # Memos of zeroscaler.core.authorization: each account's grants, and answers given.
        self._grants: dict[tuple[str, str], tuple[tuple[str, tuple[PolicyRule, ...]], ...]] = {}
        self._allowed: dict[tuple[str, str, object], bool] = {}
        for b in self.bindings:
            for s in b.subjects:
                # A ServiceAccount subject without a namespace means the binding's namespace.
                ns = (s.namespace or b.namespace) if s.kind == "ServiceAccount" else ""
                self._by_subject.setdefault((s.kind, ns, s.name), []).append(b)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> RBACSnapshot:
        """Build from raw Role, ClusterRole, RoleBinding and ClusterRoleBinding objects."""
        roles: list[Role] = []
        bindings: list[Binding] = []
        for obj in objects:
            kind = obj.get("kind")
            if kind in ("Role", "ClusterRole"):
                roles.append(role_from_object(obj, cluster=kind == "ClusterRole"))
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                b = binding_from_object(obj, cluster=kind == "ClusterRoleBinding")
                if b is not None:
                    bindings.append(b)
        return cls(roles, bindings)

    def bindings_for(self, namespace: str, service_account: str) -> list[Binding]:
        """Bindings naming the ServiceAccount, its user name or one of its groups."""
        keys = [
            ("ServiceAccount", namespace, service_account),
            ("User", "", f"system:serviceaccount:{namespace}:{service_account}"),
            ("Group", "", "system:serviceaccounts"),
            ("Group", "", f"system:serviceaccounts:{namespace}"),
            ("Group", "", "system:authenticated"),
        ]
        found: dict[int, Binding] = {}
        for key in keys:
            for b in self._by_subject.get(key, ()):
                found.setdefault(id(b), b)
        return sorted(found.values(), key=lambda b: (b.namespace, b.name))

    def rules_of(self, binding: Binding) -> tuple[PolicyRule, ...] | None:
        """The rules a binding grants (aggregation resolved); None when its role is missing."""
        if binding.role_kind == "Role":
            role = self.roles.get((binding.namespace, binding.role_name))
            return role.rules if role is not None else None
        if ("", binding.role_name) not in self.roles:
            return None
        rules: list[PolicyRule] = []
        seen: set[str] = set()
        pending = [binding.role_name]
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            role = self.roles.get(("", name))
            if role is None:
                continue
            rules.extend(role.rules)
            for selector in role.aggregation:
                pending.extend(
                    r.name
                    for (ns, _), r in self.roles.items()
                    if ns == "" and r.name not in seen and selector.matches(r.labels)
                )
        return tuple(rules)


@dataclass(frozen=True, slots=True)
class Inferred:
    """What RBAC says a workload watches and owns, canonical `Kind.group`, sorted."""

    watched: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()  # ("*",) for all namespaces
    resource_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def has_kinds(self) -> bool:
        return bool(self.watched or self.owned)


@dataclass
class _Grant:
    watch_scopes: set[str] = field(default_factory=set)
    creatable: bool = False
    names: set[str] = field(default_factory=set)
    unlimited_watch: bool = False


def infer_kinds(
    rbac: RBACSnapshot,
    namespace: str,
    service_account: str,
    discovery: Discovery,
    *,
    ignore: Collection[str] = (),
    max_kinds: int = 50,
    custom_resources: Collection[str] | None = None,
) -> Inferred:
    """Watched and owned kinds, scope and warnings for one ServiceAccount, by DESIGN.md's rules."""
    ignored = ignore if isinstance(ignore, frozenset) else frozenset(i.strip() for i in ignore)
    custom = custom_resources
    if custom is not None and not isinstance(custom, frozenset):
        custom = frozenset(custom)
    key = (namespace, service_account, id(discovery), ignored, max_kinds, custom)
    hit = rbac._memo.get(key)
    if hit is not None and hit[0] is discovery:
        return hit[1]
    result = _infer(rbac, namespace, service_account, discovery, ignored, max_kinds, custom)
    if len(rbac._memo) >= _MEMO_SIZE:
        rbac._memo.clear()
    rbac._memo[key] = (discovery, result)
    return result


def _infer(
    rbac: RBACSnapshot,
    namespace: str,
    service_account: str,
    discovery: Discovery,
    ignored: frozenset[str],
    max_kinds: int,
    custom_resources: frozenset[str] | None,
) -> Inferred:
    grants: dict[APIResource, _Grant] = {}
    warnings: list[str] = []
    unserved: set[str] = set()
    for binding in rbac.bindings_for(namespace, service_account):
        if binding.is_default:
            # Kubernetes grants every account the same (since 1.37: reading ClusterTrustBundles).
            continue
        rules = rbac.rules_of(binding)
        if rules is None:
            kind = binding.role_kind
            warnings.append(
                f"{binding.label} refers to {kind} {binding.role_name}, which does not exist"
            )
            continue
        for rule in rules:
            if not (rule.can_watch or rule.can_create) or not rule.resources:
                continue
            if rule.can_watch and "*" in rule.api_groups and "*" in rule.resources:
                return Inferred(
                    warnings=(
                        f"{service_account} may watch every resource ({binding.label}), which says "
                        "nothing about what it watches: no kinds inferred (name them in "
                        f"{WATCHED_KINDS} or in a policy rule)",
                    )
                )
            for api in _expand(rule, discovery, max_kinds, binding, warnings, unserved, ignored):
                if api.group_resource in ignored or api.canonical in ignored:
                    continue
                grant = grants.setdefault(api, _Grant())
                grant.creatable = grant.creatable or rule.can_create
                if rule.can_watch:
                    grant.watch_scopes.add(binding.scope)
                    if rule.resource_names:
                        grant.names.update(rule.resource_names)
                    else:
                        grant.unlimited_watch = True
    return _classify(grants, warnings, unserved, custom_resources)


def _expand(
    rule: PolicyRule,
    discovery: Discovery,
    max_kinds: int,
    binding: Binding,
    warnings: list[str],
    unserved: set[str],
    ignored: frozenset[str],
) -> list[APIResource]:
    found: dict[APIResource, None] = {}
    wildcard: list[APIResource] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            if "/" in resource:
                continue  # subresources (status, scale, finalizers...) are not kinds
            if group == "*" or resource == "*":
                wildcard.extend(
                    api
                    for api in discovery.in_group(group)
                    if resource in ("*", api.resource) and (not api.verbs or "watch" in api.verbs)
                )
                continue
            api = discovery.by_group_resource(group, resource)
            if api is not None:
                found[api] = None
            else:
                text = f"{resource}.{group}" if group else resource
                if text not in ignored:
                    unserved.add(text)
    if len(wildcard) > max_kinds:
        shown = ", ".join(f"{g or 'core'}/{r}" for g in rule.api_groups for r in rule.resources)
        warnings.append(
            f"{binding.label} grants {shown} ({len(wildcard)} kinds, over inference.maxKinds "
            f"{max_kinds}); that grant is not used"
        )
    else:
        found.update(dict.fromkeys(wildcard))
    return list(found)


def _classify(
    grants: Mapping[APIResource, _Grant],
    warnings: list[str],
    unserved: set[str],
    custom_resources: Collection[str] | None,
) -> Inferred:
    watched: set[str] = set()
    owned: set[str] = set()
    scopes: set[str] = set()
    namespaced_kept = False
    limited: dict[str, tuple[str, ...]] = {}
    for api, grant in grants.items():
        if not grant.watch_scopes:
            continue  # create alone says nothing about what wakes the operator
        custom = (
            api.group_resource in custom_resources
            if custom_resources is not None
            else not is_builtin_group(api.group)
        )
        if custom or not grant.creatable:
            watched.add(api.canonical)
        else:
            owned.add(api.canonical)
        if api.namespaced:
            namespaced_kept = True
            scopes.update(grant.watch_scopes)
        if not grant.unlimited_watch:
            limited[api.canonical] = tuple(sorted(grant.names))
    namespaces: tuple[str, ...] = ()
    if watched or owned:
        if ALL_NAMESPACES in scopes or not namespaced_kept:
            namespaces = (ALL_NAMESPACES,)
        else:
            namespaces = tuple(sorted(scopes))
    for kind, names in sorted(limited.items()):
        warnings.append(
            f"{kind}: RBAC allows watching only {_listing(names)}; other names never wake it"
        )
    if unserved:
        warnings.append(
            "RBAC names resources the API server does not serve, left out: "
            + _listing(sorted(unserved))
        )
    return Inferred(
        watched=tuple(sorted(watched)),
        owned=tuple(sorted(owned)),
        namespaces=namespaces,
        resource_names=limited,
        warnings=tuple(warnings),
    )


def is_builtin_group(group: str) -> bool:
    """Whether an API group is Kubernetes' own (fallback when the CRD list is not known)."""
    return group == "" or "." not in group or group.endswith(".k8s.io")


def role_from_object(obj: Mapping[str, Any], *, cluster: bool) -> Role:
    """A Role from a raw Role or ClusterRole object; malformed rules are skipped."""
    meta = _map(obj.get("metadata"))
    rules = tuple(r for r in (_rule(x) for x in _list(obj.get("rules"))) if r is not None)
    selectors: list[Selector] = []
    aggregation = _map(obj.get("aggregationRule"))
    for i, sel in enumerate(_list(aggregation.get("clusterRoleSelectors"))):
        try:
            selectors.append(parse_selector(sel, f"aggregationRule.clusterRoleSelectors[{i}]"))
        except SelectorError:
            continue
    labels = {str(k): str(v) for k, v in _map(meta.get("labels")).items()}
    return Role(
        name=str(meta.get("name", "")),
        namespace="" if cluster else str(meta.get("namespace", "")),
        rules=rules,
        labels=labels,
        aggregation=tuple(selectors),
    )


def binding_from_object(obj: Mapping[str, Any], *, cluster: bool) -> Binding | None:
    """A Binding from a raw RoleBinding or ClusterRoleBinding; None when its roleRef is unusable."""
    meta = _map(obj.get("metadata"))
    ref = _map(obj.get("roleRef"))
    kind = ref.get("kind")
    if kind not in ("Role", "ClusterRole") or (cluster and kind == "Role"):
        return None
    subjects = tuple(
        Subject(str(s.get("kind", "")), str(s.get("name", "")), str(s.get("namespace") or ""))
        for s in (_map(x) for x in _list(obj.get("subjects")))
    )
    return Binding(
        name=str(meta.get("name", "")),
        namespace="" if cluster else str(meta.get("namespace", "")),
        role_kind=kind,
        role_name=str(ref.get("name", "")),
        subjects=subjects,
        is_default=_map(meta.get("labels")).get(DEFAULTS_LABEL) == "rbac-defaults",
    )


def _rule(value: object) -> PolicyRule | None:
    rule = _map(value)
    if not rule:
        return None
    return PolicyRule(
        api_groups=_strings(rule.get("apiGroups")),
        resources=_strings(rule.get("resources")),
        verbs=frozenset(_strings(rule.get("verbs"))),
        resource_names=_strings(rule.get("resourceNames")),
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in _list(value) if isinstance(v, str))


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _listing(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")
