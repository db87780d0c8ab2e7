"""The activator: lets a workload that serves admission webhooks sleep, without breaking admission.

While such a backend sleeps, zeroscaler's own MutatingWebhookConfiguration (the activator's, which
sorts first by name) holds a copy of each of its webhooks' matching rules, pointed at zeroscaler's
webhook with `failurePolicy: Ignore`. The API server calls mutating configurations in name order and
all of them before any validating one, so a covered request reaches the activator before the
backend's own webhook: the activator wakes the backend and answers once its Service has a ready
endpoint, and the backend's webhook is then called as usual. Here: which webhooks can be covered,
and the configuration that covers them, as data.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from zeroscaler.core.disclosure import place_words, safe_word

Obj = Mapping[str, Any]
ServiceRef = tuple[str, str]  # namespace, name
Health = Literal["unknown", "serving", "failed"]

WEBHOOK_SUFFIX = ".activator.zeroscaler.io"
PROBE_WEBHOOK = "probe" + WEBHOOK_SUFFIX
PROBE_LABEL = "zeroscaler.io/activator-probe"
PROBE_PATH = "/activate/probe"
ACTIVATE_PATH = "/activate"
PROBE_WARNING = "zeroscaler activator probe"
# What decides which requests a webhook is sent; copied as they are.
MATCH_FIELDS = ("rules", "namespaceSelector", "objectSelector", "matchPolicy", "matchConditions")
_KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet"}  # as the paths spell them
MIN_TIMEOUT, MAX_TIMEOUT = 2, 30  # the API server allows 1-30 s; one second is kept for the answer


@dataclass(frozen=True, slots=True, order=True)
class Hook:
    """One admission webhook of a registration, as far as which requests reach it."""

    configuration: str  # the name of its webhook configuration
    mutating: bool
    name: str  # the webhook's own name within it
    service: ServiceRef
    match: str  # its MATCH_FIELDS as canonical JSON, so a Hook is hashable and cheap to compare
    fails: bool = True  # failurePolicy Fail (the default): unreachable, it refuses what it covers

    @property
    def fields(self) -> dict[str, Any]:
        """Its matching fields, as the API server reads them."""
        result: dict[str, Any] = json.loads(self.match)
        return result

    def __str__(self) -> str:
        kind = "Mutating" if self.mutating else "Validating"
        return f"{kind}WebhookConfiguration {self.configuration}, webhook {self.name}"


def hooks_of(mutating: bool, obj: Obj) -> tuple[Hook, ...]:
    """The Service-backed webhooks of one Mutating- or ValidatingWebhookConfiguration."""
    configuration = str((obj.get("metadata") or {}).get("name", ""))
    found: list[Hook] = []
    for webhook in obj.get("webhooks") or []:
        if not isinstance(webhook, Mapping):
            continue
        service = (webhook.get("clientConfig") or {}).get("service")
        if not isinstance(service, Mapping) or not service.get("name"):
            continue  # by url: not attributable to any workload
        ref = (str(service.get("namespace") or ""), str(service["name"]))
        match = {k: webhook[k] for k in MATCH_FIELDS if k in webhook}
        found.append(
            Hook(
                configuration,
                mutating,
                str(webhook.get("name", "")),
                ref,
                json.dumps(match, sort_keys=True, separators=(",", ":")),
                webhook.get("failurePolicy") != "Ignore",
            )
        )
    return tuple(sorted(found))


@dataclass(frozen=True, slots=True)
class ActivatorState:
    """What the controller knows of the activator: on or off, its name, whether it answers."""

    configuration: str = ""  # its MutatingWebhookConfiguration; empty: the activator is off
    health: Health = "unknown"  # from the last probe through the API server

    @property
    def enabled(self) -> bool:
        return bool(self.configuration)


OFF = ActivatorState()


def activation_block(hooks: Iterable[Hook], activator: ActivatorState) -> str | None:
    """Why the activator cannot answer for these webhooks while their backend sleeps, or None.

    A mutating webhook whose configuration is called before the activator's would be called
    while its backend still sleeps, so it cannot be covered.
    """
    hooks = list(hooks)
    if not hooks:
        return None
    if not activator.enabled:
        return "the activator is off"
    if activator.health == "failed":
        return "the activator cannot serve (its probe through the API server went unanswered)"
    for hook in hooks:
        if hook.mutating and hook.configuration <= activator.configuration:
            return (
                f"MutatingWebhookConfiguration {hook.configuration} is called before the "
                f"activator's {activator.configuration} (configurations are called in name order)"
            )
    return None


def bounded_timeout(timeout: int) -> int:
    """The activator's timeout as the API server allows it."""
    return min(max(timeout, MIN_TIMEOUT), MAX_TIMEOUT)


def needs_cover(*, asleep: bool, starting: bool, going_to_sleep: bool) -> bool:
    """Whether a backend's webhooks must be covered: from before its sleep until it is Ready."""
    return asleep or starting or going_to_sleep


@dataclass(frozen=True, slots=True)
class Covered:
    """A backend to cover: its workload and the webhooks it serves."""

    kind: str  # Deployment or StatefulSet
    namespace: str
    name: str
    hooks: tuple[Hook, ...]


# A path's secret part: only those who may read the activator's configuration know it.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a namespace or Service name
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True, slots=True)
class Target:
    """What an activate path asks for: wake this workload, wait at most `wait` seconds for its
    Service."""

    token: str
    wait: int
    kind: str  # Deployment or StatefulSet
    namespace: str
    name: str
    service: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.namespace, self.name


def activate_path(backend: Covered, hook: Hook, wait: int, token: str) -> str:
    """Where the activator is called for one covered webhook: a token only the configuration's
    readers know, then what to wake and what to wait for (names are DNS labels or subdomains, so
    they need no escaping)."""
    kind = backend.kind.lower()
    return (
        f"{ACTIVATE_PATH}/{token}/{wait}/{kind}/{backend.namespace}/{backend.name}/"
        f"{hook.service[1]}"
    )


def parse_activate_path(path: str) -> Target | None:
    """The target of an activate path, or None if it is not one (every part checked)."""
    if not path.startswith(ACTIVATE_PATH + "/") or len(path) > 600:
        return None
    parts = path.removeprefix(ACTIVATE_PATH + "/").split("/")
    if len(parts) != 6:
        return None
    token, wait, kind, namespace, name, service = parts
    if not (_TOKEN.fullmatch(token) and wait.isdigit() and len(wait) <= 2 and kind in _KINDS):
        return None
    if not (_LABEL.fullmatch(namespace) and _LABEL.fullmatch(service)):
        return None
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        return None
    return Target(token, int(wait), _KINDS[kind], namespace, name, service)


@dataclass(frozen=True, slots=True)
class CoveredEntry:
    """One webhook of the activator's configuration: what it wakes, and the matching fields it
    was copied from (which requests the API server sends it)."""

    target: Target
    match: Mapping[str, Any]


def covered_entries(configuration: Obj) -> dict[str, CoveredEntry]:
    """The activator configuration's webhooks by the path each is called at (the probe left
    out); a webhook whose path is not an activate path is left out too."""
    found: dict[str, CoveredEntry] = {}
    for webhook in configuration.get("webhooks") or []:
        if not isinstance(webhook, Mapping) or webhook.get("name") == PROBE_WEBHOOK:
            continue
        path = _path_of(webhook.get("clientConfig"))
        target = parse_activate_path(path) if path else None
        if target is not None:
            found[path] = CoveredEntry(
                target, {k: webhook[k] for k in MATCH_FIELDS if k in webhook}
            )
    return found


def tokens_of(configuration: Obj) -> dict[str, str]:
    """Each covered webhook's token, by the webhook's name: a rewrite keeps the paths it had."""
    tokens: dict[str, str] = {}
    for webhook in configuration.get("webhooks") or []:
        if not isinstance(webhook, Mapping):
            continue
        target = parse_activate_path(_path_of(webhook.get("clientConfig")))
        if target is not None:
            tokens[str(webhook.get("name", ""))] = target.token
    return tokens


def _path_of(client: object) -> str:
    """The path of a clientConfig's service or url."""
    if not isinstance(client, Mapping):
        return ""
    if isinstance(client.get("service"), Mapping):
        return str(client["service"].get("path") or "")
    url = str(client.get("url") or "")
    rest = url.partition("://")[2]
    return "/" + rest.split("/", 1)[1] if "/" in rest else ""


def _client(base: Obj, path: str) -> dict[str, Any]:
    """zeroscaler's webhook clientConfig (from its own configuration) with another path."""
    client: dict[str, Any] = {}
    if base.get("caBundle"):
        client["caBundle"] = base["caBundle"]
    if isinstance(base.get("service"), Mapping):
        client["service"] = {**base["service"], "path": path}
    elif isinstance(base.get("url"), str):
        url = str(base["url"])
        scheme, _, rest = url.partition("://")
        host = rest.split("/", 1)[0]
        client["url"] = f"{scheme}://{host}{path}"
    return client


def probe_token(webhooks: list[dict[str, Any]]) -> str:
    """A label value naming one content of the activator's configuration."""
    text = json.dumps(webhooks, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def webhook_name(backend: Covered, hook: Hook) -> str:
    """The activator's name for its copy of one covered webhook (the same at every render)."""
    what = f"{backend.kind}/{backend.namespace}/{backend.name}/{hook.configuration}/{hook.name}"
    return "h" + hashlib.sha256(what.encode()).hexdigest()[:12] + WEBHOOK_SUFFIX


def render(
    covered: Iterable[Covered],
    base: Obj,
    timeout: int,
    probe_namespace: str,
    token_for: Callable[[str], str],
) -> tuple[list[dict[str, Any]], str]:
    """The activator configuration's `webhooks` and the probe token they carry.

    One copy of each covered webhook's matching rules, at a path holding `token_for(its name)`,
    then the probe: a webhook for dry-run Lease creates labelled with the token, so that seeing
    the probe answered proves the API server calls this very content. Dry runs are declared
    free of side effects, and the activator wakes nothing for them.
    """
    timeout = bounded_timeout(timeout)
    webhooks: list[dict[str, Any]] = []
    for backend in sorted(covered, key=lambda b: (b.namespace, b.name, b.kind)):
        for hook in backend.hooks:
            entry: dict[str, Any] = hook.fields
            name = webhook_name(backend, hook)
            path = activate_path(backend, hook, timeout - 1, token_for(name))
            entry.update(
                name=name,
                clientConfig=_client(base, path),
                failurePolicy="Ignore",
                sideEffects="NoneOnDryRun",
                admissionReviewVersions=["v1"],
                timeoutSeconds=timeout,
                reinvocationPolicy="Never",
            )
            webhooks.append(entry)
    token = probe_token(webhooks)
    probe = {
        "name": PROBE_WEBHOOK,
        "clientConfig": _client(base, PROBE_PATH),
        "rules": [
            {
                "apiGroups": ["coordination.k8s.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["leases"],
                "scope": "Namespaced",
            }
        ],
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": probe_namespace},
        },
        "objectSelector": {"matchLabels": {PROBE_LABEL: token}},
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": MIN_TIMEOUT,
    }
    return [probe, *webhooks], token


def probe_lease(token: str) -> dict[str, Any]:
    """The dry-run Lease whose admission proves the activator's content `token` is called."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"generateName": "zeroscaler-activator-probe-", "labels": {PROBE_LABEL: token}},
    }


def probe_answered(warnings: Iterable[str], token: str) -> bool:
    """Whether the API server's answer carries the activator's warning for `token`."""
    return any(f"{PROBE_WARNING} {token}" in w for w in warnings)


def request_key(kind: str, namespace: str, name: str) -> str:
    """The activator requests ConfigMap's key for a workload (names hold no underscore)."""
    return f"{kind.lower()}_{namespace}_{name}"


def parse_request_key(key: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a requests key, or None if it is not one."""
    parts = key.split("_")
    if len(parts) != 3 or parts[0] not in _KINDS or not all(parts):
        return None
    return _KINDS[parts[0]], parts[1], parts[2]


def ready_endpoints(slices: Iterable[Obj]) -> frozenset[str]:
    """The endpoints of a Service's EndpointSlices that the API server would call (an address
    whose `ready` condition is true or unset, which means ready), each named by the uid of the
    Pod behind it, or by its addresses when it names none."""
    ready: set[str] = set()
    for slice_ in slices:
        for endpoint in slice_.get("endpoints") or []:
            conditions = endpoint.get("conditions") or {}
            addresses = endpoint.get("addresses")
            if addresses and conditions.get("ready") is not False:
                uid = (endpoint.get("targetRef") or {}).get("uid")
                ready.add(str(uid) if uid else ",".join(map(str, addresses)))
    return frozenset(ready)


def has_ready_endpoint(slices: Iterable[Obj]) -> bool:
    """Whether a Service's EndpointSlices hold an endpoint the API server would call."""
    return bool(ready_endpoints(slices))


def describe_request(request: Obj, home: str) -> str:
    """An admission request in an Event's words: operation, resource and object, and who asked
    when it was asked in `home` (the backend's namespace); see `zeroscaler.core.disclosure`."""
    resource = request.get("resource") or {}
    group = str(resource.get("group") or "")
    plural = str(resource.get("resource") or "?")
    sub = str(request.get("subResource") or "")
    what = safe_word(plural + (f".{group}" if group else "") + (f"/{sub}" if sub else ""))
    namespace = str(request.get("namespace") or "")
    name = str(request.get("name") or "")
    target = place_words(plural, namespace, name, home, sub) or "(new)"
    user = str((request.get("userInfo") or {}).get("username") or "")
    said = f"{safe_word(request.get('operation', '?'))} {what} {target}"
    return said + (f" by {safe_word(user)}" if user and namespace == home else "")
