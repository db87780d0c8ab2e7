"""Kind references (`Kind`, `Kind.group`, `resource.group`...) resolved through discovery."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_VERSION = re.compile(r"^v\d+((alpha|beta)\d+)?$")
_SEGMENT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$")

KIND_REF_FORM = (
    "Kind, Kind.group, Kind.version.group, resource or resource.group "
    "(e.g. ConfigMap, Deployment.apps)"
)


class KindRefError(ValueError):
    """A kind reference that is not of a form we accept."""


@dataclass(frozen=True, slots=True)
class KindRef:
    """A parsed reference; `kind` is set for Kind forms, `resource` for resource forms."""

    text: str
    kind: str | None = None
    resource: str | None = None
    group: str | None = None  # None: any group (core preferred)
    version: str | None = None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class APIResource:
    """One served resource type, as discovery reports it (preferred version)."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool = True
    verbs: frozenset[str] = frozenset()
    subresources: frozenset[str] = frozenset()
    singular: str = ""
    short_names: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def canonical(self) -> str:
        """The `Kind.group` form the webhook writes (core kinds bare)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def group_resource(self) -> str:
        """The `resource.group` form RBAC and the ignore list use (core resources bare)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def api_path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of this resource, optionally in a namespace and for one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.resource}"
        return f"{base}/{name}" if name else base


# Kept: every reconcile reads its workload's kinds, and thousands of workloads name the same few.
@functools.lru_cache(maxsize=1024)
def parse_kind_ref(text: str) -> KindRef:
    """Parse one kind reference; raise KindRefError naming the accepted forms."""
    ref = text.strip()
    parts = ref.split(".")
    if not ref or not all(_SEGMENT.match(p) for p in parts):
        raise KindRefError(f"{text!r} is not a kind reference (use {KIND_REF_FORM})")
    head, rest = parts[0], parts[1:]
    version = None
    if len(rest) >= 2 and _VERSION.match(rest[0]):
        version, rest = rest[0], rest[1:]
    group = ".".join(rest) if rest else None
    if head[0].isupper():
        return KindRef(text=ref, kind=head, group=group, version=version)
    return KindRef(text=ref, resource=head.lower(), group=group, version=version)


def parse_kind_refs(text: str) -> tuple[list[KindRef], list[str]]:
    """Parse a comma-separated list; return the good references and one message per bad one."""
    refs: list[KindRef] = []
    errors: list[str] = []
    for item in text.split(","):
        if not item.strip():
            continue
        try:
            refs.append(parse_kind_ref(item))
        except KindRefError as e:
            errors.append(str(e))
    return refs, errors


def kind_ref_from_api_version(api_version: str, kind: str) -> KindRef:
    """The reference for an `apiVersion` + `kind` pair (IBM's JSON form, owner references)."""
    group, _, version = api_version.rpartition("/")
    text = f"{kind}.{version}.{group}" if group else kind
    return KindRef(text=text, kind=kind, group=group, version=version or None)


@dataclass(frozen=True)
class Discovery:
    """A snapshot of the resource types the API server serves."""

    resources: Sequence[APIResource] = ()
    _by_kind: dict[str, list[APIResource]] = field(default_factory=dict, init=False, repr=False)
    _by_name: dict[str, list[APIResource]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for r in self.resources:
            self._by_kind.setdefault(r.kind.lower(), []).append(r)
            for name in {r.resource, r.singular or r.kind.lower(), *r.short_names}:
                self._by_name.setdefault(name.lower(), []).append(r)

    def resolve(self, ref: KindRef) -> APIResource | None:
        """The served type a reference names; a bare name prefers the core group."""
        if ref.kind is not None:
            candidates = self._by_kind.get(ref.kind.lower(), [])
            exact = [r for r in candidates if r.kind == ref.kind]
            candidates = exact or candidates
        else:
            candidates = self._by_name.get((ref.resource or "").lower(), [])
        if ref.group is not None:
            candidates = [r for r in candidates if r.group == ref.group]
        if ref.version is not None:
            candidates = [r for r in candidates if r.version == ref.version] or candidates
        if not candidates:
            return None
        core = [r for r in candidates if r.group == ""]
        return (core or candidates)[0]

    def by_group_resource(self, group: str, resource: str) -> APIResource | None:
        """The served type for an RBAC-style (group, resource) pair."""
        for r in self._by_name.get(resource.lower(), []):
            if r.group == group and r.resource == resource:
                return r
        return None

    def in_group(self, group: str) -> Iterable[APIResource]:
        """All served types of one API group (`*` for every group)."""
        return (r for r in self.resources if group == "*" or r.group == group)

    def merged_with(self, extra: Iterable[APIResource]) -> Discovery:
        """This snapshot plus the types in `extra` it does not have (by group and resource)."""
        known = {(r.group, r.resource) for r in self.resources}
        added = [r for r in extra if (r.group, r.resource) not in known]
        return Discovery([*self.resources, *added]) if added else self


CRD_VERBS = frozenset(
    {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)


def api_resource_from_crd(crd: Mapping[str, Any]) -> APIResource | None:
    """The type a CustomResourceDefinition defines, as discovery will serve it once established.

    Lets a kind be named in the moment between a CRD's creation and its appearance in discovery,
    which is when an operator applied together with its CRDs is admitted.
    """
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return None
    raw_names = spec.get("names")
    names: Mapping[str, Any] = raw_names if isinstance(raw_names, Mapping) else {}
    group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
    versions = [v for v in spec.get("versions") or [] if isinstance(v, Mapping) and v.get("served")]
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(plural, str)):
        return None
    if not versions:
        return None
    version = next((v for v in versions if v.get("storage")), versions[0])
    subresources = version.get("subresources") or {}
    short = names.get("shortNames") or ()
    return APIResource(
        group=group,
        version=str(version.get("name", "")),
        resource=plural,
        kind=kind,
        namespaced=spec.get("scope") != "Cluster",
        verbs=CRD_VERBS,
        subresources=frozenset(k for k in ("status", "scale") if k in subresources),
        singular=str(names.get("singular") or kind.lower()),
        short_names=tuple(str(n) for n in short),
    )
