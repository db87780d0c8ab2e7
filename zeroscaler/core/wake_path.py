"""Never sleep what cannot wake: the requests a backend's wake needs, and its own webhooks that
would refuse them while it sleeps.

A wake is a chain of requests, each admitted by every webhook that covers it: zeroscaler's scale
write, the ReplicaSet's (or StatefulSet's) pods and their binding, the EndpointSlice that makes
the new pod reachable, and what keeps the cluster and zeroscaler itself going meanwhile (Leases,
Nodes, RBAC, Namespaces, the pods and ConfigMaps of zeroscaler's and kube-system's namespaces).
A webhook with `failurePolicy: Fail` served by the sleeping backend refuses each request it
covers ("no endpoints available"); the activator holds it until the backend is Ready, which
cannot happen if the backend's own start is among the refused. So before a sleep every `Fail`
webhook of the backend is matched against these requests (`zeroscaler.core.matching`), and one
that can match — or might, where labels are not known in advance — keeps it awake.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zeroscaler.core.coverage import Hook
from zeroscaler.core.matching import Attributes, LabelValues, webhook_matches

# Labels the workload's controller adds to what it makes, their values not known in advance.
_ADDED_LABELS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("pod-template-hash",),
    "StatefulSet": (
        "controller-revision-hash",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
    ),
}
_RESOURCES = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
_LEASES = "coordination.k8s.io"
_RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class Backend:
    """A workload about to be put to sleep, as far as its wake's requests go."""

    kind: str  # Deployment or StatefulSet
    namespace: str
    name: str
    pod_labels: Mapping[str, str]  # its pod template's
    services: tuple[str, ...] = ()  # the Services whose endpoints its pods are


@dataclass(frozen=True, slots=True)
class Surroundings:
    """Where zeroscaler runs, and the labels of the namespaces a wake touches (as watched)."""

    home: str  # zeroscaler's own namespace
    namespace_labels: Mapping[str, Mapping[str, str]]  # by name; a namespace missing: not known


@dataclass(frozen=True, slots=True)
class Blocker:
    """A webhook of the backend's that would refuse a request its wake needs."""

    hook: Hook
    request: str  # the request, in words
    rule: str  # the rule that covers it
    why: str = ""  # when it only might: what is not known

    def __str__(self) -> str:
        maybe = f" ({self.why})" if self.why else ""
        return f"{self.hook}: its rule {self.rule} covers {self.request}{maybe}"


def wake_requests(backend: Backend, around: Surroundings) -> list[tuple[str, Attributes]]:
    """The requests a wake of `backend` needs admitted, each with its words."""
    ns = backend.namespace
    added: dict[str, str | None] = dict.fromkeys(_ADDED_LABELS.get(backend.kind, ()), None)
    pod: LabelValues = {**backend.pod_labels, **added}
    resource = _RESOURCES.get(backend.kind, backend.kind.lower() + "s")

    def at(
        namespace: str,
        operation: str,
        group: str,
        plural: str,
        subresource: str = "",
        labels: LabelValues | None = None,
    ) -> Attributes:
        """A request; `labels` for its object (and old object, on an UPDATE) when they are
        known in advance, else any labels at all."""
        return Attributes(
            operation,
            group,
            "v1",
            plural,
            subresource,
            namespace=namespace,
            object_labels=labels,
            old_labels=labels if operation == "UPDATE" else None,
            labels_known=labels is not None,
            namespace_labels=around.namespace_labels.get(namespace) if namespace else None,
        )

    own = f"{ns}/{backend.name}"
    found: list[tuple[str, Attributes]] = [
        # The wake itself: zeroscaler writes the scale subresource (a Scale has no labels).
        (f"the scale write that wakes {own}", at(ns, "UPDATE", "apps", resource, "scale")),
        (f"the pods of {own}", at(ns, "CREATE", "", "pods", labels=pod)),
        (f"the scheduling of the pods of {own}", at(ns, "CREATE", "", "pods", "binding")),
        (f"the status of {own}", at(ns, "UPDATE", "apps", resource, "status")),
    ]
    if backend.kind == "Deployment":
        found.append(
            (f"the ReplicaSet of {own}", at(ns, "UPDATE", "apps", "replicasets", labels=pod))
        )
    else:
        found.append((f"the revisions of {own}", at(ns, "CREATE", "apps", "controllerrevisions")))
    for service in backend.services:
        endpoints = {"kubernetes.io/service-name": service}
        found.append(
            (
                f"the endpoints of Service {ns}/{service}",
                at(ns, "UPDATE", "discovery.k8s.io", "endpointslices", labels=endpoints),
            )
        )
    for namespace in dict.fromkeys((around.home, "kube-system")):
        where = f"zeroscaler's namespace ({namespace})" if namespace == around.home else namespace
        found += [
            (f"pods in {where}", at(namespace, "CREATE", "", "pods")),
            (f"ConfigMaps in {where}", at(namespace, "UPDATE", "", "configmaps")),
            (f"Leases in {where}", at(namespace, "UPDATE", _LEASES, "leases")),
        ]
    found += [
        (
            "node heartbeats (Leases in kube-node-lease)",
            at("kube-node-lease", "UPDATE", _LEASES, "leases"),
        ),
        ("Nodes", at("", "UPDATE", "", "nodes")),
        ("the status of Nodes", at("", "UPDATE", "", "nodes", "status")),
        ("Namespaces", at("", "CREATE", "", "namespaces")),
        ("ClusterRoles", at("", "UPDATE", _RBAC, "clusterroles")),
        ("ClusterRoleBindings", at("", "UPDATE", _RBAC, "clusterrolebindings")),
        (f"Roles in {ns}", at(ns, "UPDATE", _RBAC, "roles")),
        (f"RoleBindings in {ns}", at(ns, "UPDATE", _RBAC, "rolebindings")),
    ]
    return found


def blockers(hooks: Iterable[Hook], backend: Backend, around: Surroundings) -> list[Blocker]:
    """The backend's `Fail` webhooks that would, or might, refuse a request its wake needs: one
    per webhook, naming the first such request."""
    requests = wake_requests(backend, around)
    found: list[Blocker] = []
    for hook in hooks:
        if not hook.fails:
            continue
        fields = hook.fields
        for words, request in requests:
            match = webhook_matches(fields, request)
            if match.verdict != "no":
                found.append(Blocker(hook, words, match.rule, match.why))
                break
    return found
