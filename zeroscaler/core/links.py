"""What a workload serves: the Services that select its pods, and the API registrations behind them.

A webhook configuration, a CRD's conversion webhook or an APIService names its backend by
`service: {namespace, name}`; the API server reaches it through that Service's ready endpoints, so
when the workload behind it sleeps, the registration fails. A registration given by `url` names no
Service and cannot be attributed to any workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from zeroscaler.core.annotations import Notice
from zeroscaler.core.coverage import Hook

LinkKind = Literal[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "CustomResourceDefinition",
    "APIService",
]
ADMISSION_KINDS: frozenset[LinkKind] = frozenset(
    {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
)
ServiceRef = tuple[str, str]  # namespace, name
Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True, order=True)
class Link:
    """One API registration the API server calls through `service`."""

    kind: LinkKind
    name: str
    service: ServiceRef

    @property
    def is_admission(self) -> bool:
        return self.kind in ADMISSION_KINDS

    def __str__(self) -> str:
        return f"{self.kind} {self.name} (Service {self.service[0]}/{self.service[1]})"


ACTIVATOR_OFF = "the activator is off"


@dataclass(frozen=True, slots=True)
class Serving:
    """The registrations a workload backs, sorted; empty when it serves none of them."""

    links: tuple[Link, ...] = ()
    hooks: tuple[Hook, ...] = ()  # its admission webhooks, for the activator to cover
    # Why no activator answers for its admission webhooks while it sleeps; None: one does.
    unanswered: str | None = ACTIVATOR_OFF

    @property
    def api(self) -> tuple[Link, ...]:
        """Conversion webhooks and APIServices: reads and discovery fail while it sleeps."""
        return tuple(link for link in self.links if not link.is_admission)

    @property
    def admission(self) -> tuple[Link, ...]:
        return tuple(link for link in self.links if link.is_admission)

    @property
    def keeps_awake(self) -> bool:
        """Whether it must not be put to sleep: it backs an API, or webhooks nobody answers for."""
        return bool(self.api) or (bool(self.admission) and self.unanswered is not None)

    def reason(self) -> str:
        """Why it is not put to sleep, naming the first registration of the strongest kind."""
        if self.api:
            return f"backs {self.api[0]}; never put to sleep"
        return (
            f"backs {self.admission[0]}, and no activator answers for it ({self.unanswered}); "
            "not put to sleep"
        )


NOTHING_SERVED = Serving()


def _service_ref(config: Obj | None, *, default_namespace: str = "") -> ServiceRef | None:
    """The `{namespace, name}` of a `service` block, or None (a `url`, or nothing)."""
    if not isinstance(config, Mapping):
        return None
    namespace = str(config.get("namespace") or default_namespace)
    name = str(config.get("name") or "")
    return (namespace, name) if namespace and name else None


def links_of(kind: LinkKind, obj: Obj) -> tuple[Link, ...]:
    """The Service-backed links one registration object holds (one per Service it names)."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    refs: list[ServiceRef | None] = []
    if kind in ADMISSION_KINDS:
        for webhook in obj.get("webhooks") or []:
            client = (webhook or {}).get("clientConfig") or {}
            refs.append(_service_ref(client.get("service")))
    elif kind == "CustomResourceDefinition":
        conversion = (obj.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            client = (conversion.get("webhook") or {}).get("clientConfig") or {}
            refs.append(_service_ref(client.get("service")))
    else:  # APIService: no `service` means the API server serves the group itself
        refs.append(_service_ref((obj.get("spec") or {}).get("service")))
    return tuple(sorted({Link(kind, name, ref) for ref in refs if ref is not None}))


def selects(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Whether a Service's selector selects pods with `labels`; an empty selector selects none
    (its endpoints are kept by hand, not by the pods' labels)."""
    if not selector:
        return False
    return all(labels.get(k) == v for k, v in selector.items())


def find_serving(
    namespace: str,
    pod_labels: Mapping[str, str],
    services: Iterable[tuple[str, Mapping[str, str] | None]],
    links: Mapping[ServiceRef, Iterable[Link]],
    hooks: Mapping[ServiceRef, Iterable[Hook]] | None = None,
) -> Serving:
    """What a workload whose pods carry `pod_labels` serves, from the Services of its namespace
    (name and selector), the links and the admission webhooks by the Service they name."""
    found: set[Link] = set()
    found_hooks: set[Hook] = set()
    for name, selector in services:
        if selects(selector, pod_labels):
            found.update(links.get((namespace, name), ()))
            found_hooks.update((hooks or {}).get((namespace, name), ()))
    return Serving(tuple(sorted(found)), tuple(sorted(found_hooks)))


def serving_notices(serving: Serving) -> list[Notice]:
    """The Warnings that say what keeps a workload awake, one per registration."""
    notices: list[Notice] = []
    for link in serving.api:
        what = (
            "reads of its custom resources at other versions fail"
            if link.kind == "CustomResourceDefinition"
            else "discovery of its API group fails and namespace deletion stalls"
        )
        notices.append(("BacksAPI", f"backs {link}: {what} while it sleeps; never put to sleep"))
    if serving.unanswered is None:
        return notices
    for link in serving.admission:
        notices.append(
            (
                "BacksWebhook",
                f"backs {link}: the API server calls it on admission, and no activator can answer "
                f"for it while it sleeps ({serving.unanswered}); not put to sleep while that lasts",
            )
        )
    return notices
