"""API discovery: every served resource type, asked again cheaply with each root's ETag."""

from __future__ import annotations

import collections
import logging

from zeroscaler.api.errors import KubeError
from zeroscaler.api.transport import Obj, Transport, decoded
from zeroscaler.core.kinds import APIResource

log = logging.getLogger(__name__)

# Aggregated discovery (GA in 1.30, beta as v2beta1 before), else the older per-group answers.
_ACCEPT_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
NO_AGGREGATED_DISCOVERY = (
    "the API server does not serve aggregated discovery (apidiscovery.k8s.io/v2, Kubernetes 1.30 "
    "and later): discovering group by group instead, one request per API group at each refresh"
)
ROOTS = ("/api", "/apis")


class DiscoveryCache:
    """Each root's last answer (ETag, types) and the last combined list of types."""

    def __init__(self) -> None:
        self._etags: dict[str, tuple[str, list[APIResource]]] = {}
        self._discovered: list[APIResource] | None = None
        self.aggregated: bool | None = None  # None until the server has answered

    async def discover(self, api: Transport) -> list[APIResource]:
        """Every served resource type at its group's preferred version (aggregated discovery).

        Each root is asked again with the ETag of its last answer; when neither changed the server
        answers 304 and this returns the same list object as last time, with nothing parsed. A
        server without aggregated discovery is asked group by group (saying so once).
        """
        answers = [await self._discover_root(api, root) for root in ROOTS]
        if self._discovered is None or any(fresh for _, fresh in answers):
            self._discovered = [r for resources, _ in answers for r in resources]
        return self._discovered

    async def _discover_root(self, api: Transport, root: str) -> tuple[list[APIResource], bool]:
        """A root's resource types, and whether they were read afresh (not a 304)."""
        headers = {"Accept": _ACCEPT_DISCOVERY}
        cached = self._etags.get(root)
        if cached is not None:
            headers["If-None-Match"] = cached[0]
        resp = await api.send("GET", root, headers=headers)
        if resp.status_code == 304 and cached is not None:
            return cached[1], False
        answer = decoded(api.checked("GET", resp))
        if answer.get("kind") != "APIGroupDiscoveryList":
            if self.aggregated is not False:
                log.warning(NO_AGGREGATED_DISCOVERY)
            self.aggregated = False
            return await discover_legacy(api, root, answer), True
        self.aggregated = True
        groups = answer.get("items") or []
        resources = [r for group in groups for r in _group_resources(group)]
        if etag := resp.headers.get("ETag"):
            self._etags[root] = (etag, resources)
        return resources, True


async def discover_by_group(api: Transport) -> list[APIResource]:
    """Every served resource type asked group by group, as servers before 1.30 need."""
    return [r for root in ROOTS for r in await discover_legacy(api, root)]


async def discover_legacy(
    api: Transport, root: str, answer: Obj | None = None
) -> list[APIResource]:
    """A root's types from APIVersions (/api) or APIGroupList (/apis), one list per group.

    A group whose list fails (an aggregated API that is down) is left out until next time.
    """
    if answer is None:
        answer = await api.request("GET", root)
    if root == "/api":
        versions = [("", str(v)) for v in (answer.get("versions") or [])[:1]]
    else:
        versions = [
            (str(g.get("name", "")), str((g.get("preferredVersion") or {}).get("version", "")))
            for g in answer.get("groups") or []
        ]
    resources: list[APIResource] = []
    for group, version in versions:
        path = f"{root}/{group}/{version}" if group else f"{root}/{version}"
        try:
            listing = await api.request("GET", path)
        except KubeError as e:
            log.warning("API discovery of %s failed, leaving it out: %s", path.lstrip("/"), e)
            continue
        resources += _listed_resources(group, version, listing)
    return resources


def _group_resources(group: Obj) -> list[APIResource]:
    versions = group.get("versions") or []
    if not versions:
        return []
    preferred = versions[0]  # the server lists the preferred version first
    name = (group.get("metadata") or {}).get("name", "")
    out = []
    for r in preferred.get("resources") or []:
        kind = (r.get("responseKind") or {}).get("kind")
        if not kind:
            continue
        out.append(
            APIResource(
                group=name,
                version=preferred.get("version", ""),
                resource=r.get("resource", ""),
                kind=kind,
                namespaced=r.get("scope") == "Namespaced",
                verbs=frozenset(r.get("verbs") or ()),
                subresources=frozenset(
                    s.get("subresource", "") for s in r.get("subresources") or ()
                ),
                singular=r.get("singularResource", ""),
                short_names=tuple(r.get("shortNames") or ()),
            )
        )
    return out


def _listed_resources(group: str, version: str, listing: Obj) -> list[APIResource]:
    """The types in an APIResourceList; `deployments/scale` entries become subresources."""
    entries = [r for r in listing.get("resources") or [] if r.get("name")]
    subresources: dict[str, set[str]] = collections.defaultdict(set)
    for r in entries:
        parent, slash, sub = str(r["name"]).partition("/")
        if slash:
            subresources[parent].add(sub)
    return [
        APIResource(
            group=group,
            version=version,
            resource=str(r["name"]),
            kind=str(r["kind"]),
            namespaced=bool(r.get("namespaced")),
            verbs=frozenset(r.get("verbs") or ()),
            subresources=frozenset(subresources.get(str(r["name"]), ())),
            singular=str(r.get("singularName") or ""),
            short_names=tuple(r.get("shortNames") or ()),
        )
        for r in entries
        if "/" not in str(r["name"]) and r.get("kind")
    ]
