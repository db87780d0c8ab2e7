"""The chart as `helm template` renders it, and what every chart test file reads of it: objects by
kind and name, the Deployments and their containers, the webhook configuration, RBAC rules and the
command lines the chart passes."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.chart.conftest import CHART, RELEASE, Helm

ENABLED_LABEL = "zeroscaler.io/enabled"
URL = "https://127.0.0.1:9443/mutate"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
# On the host network the webhook needs a node port other than the kubelet's 10250.
HOST_NETWORK = ("--set", "hostNetwork=true", "--set", "webhook.port=9443")

Obj = dict[str, Any]

# Verbs that change something; everything else (get, list, watch) only reads.
WRITE_VERBS = {
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "escalate",
    "bind",
    "impersonate",
    "approve",
    "sign",
    "use",
}


def render(helm: Helm, *args: str, mode: str | None = "split") -> list[Obj]:
    """The objects `helm template` renders (hooks included) for these flags, in `mode` (split
    unless told: most tests look at the two Deployments; None renders the chart's default)."""
    proc = helm.template(*(["--set", f"mode={mode}"] if mode else []), *args)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def only(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    """The one object of `kind` (and `name`); fails when there is none or more than one."""
    found = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def kinds(objs: list[Obj]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def deployment(objs: list[Obj], component: str) -> Obj:
    return only(objs, "Deployment", f"{RELEASE}-zeroscaler-{component}")


def container(dep: Obj) -> Obj:
    containers = dep["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: Obj = containers[0]
    return result


def webhook_configuration(objs: list[Obj]) -> Obj:
    """zeroscaler's own MutatingWebhookConfiguration (not the activator's)."""
    found = [
        o
        for o in objs
        if o["kind"] == "MutatingWebhookConfiguration"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") != "activator"
    ]
    assert len(found) == 1, f"expected zeroscaler's own configuration, found {len(found)}"
    return found[0]


def webhook_entry(objs: list[Obj]) -> Obj:
    config = webhook_configuration(objs)
    assert len(config["webhooks"]) == 1
    entry: Obj = config["webhooks"][0]
    return entry


def certs_job(objs: list[Obj]) -> Obj:
    return only(objs, "Job", f"{RELEASE}-zeroscaler-certs")


def is_hook(obj: Obj) -> bool:
    return "helm.sh/hook" in (obj["metadata"].get("annotations") or {})


def roles(objs: list[Obj]) -> dict[str, list[Obj]]:
    """Rules of every Role and ClusterRole, by "Kind/name"."""
    return {
        f"{o['kind']}/{o['metadata']['name']}": o.get("rules") or []
        for o in objs
        if o["kind"] in ("Role", "ClusterRole")
    }


def grants(rules: list[Obj], group: str, resource: str, verb: str, name: str = "") -> bool:
    """Whether RBAC rules allow `verb` on `resource` in `group` (for object `name`, if given)."""
    for rule in rules:
        if not ({group, "*"} & set(rule.get("apiGroups") or [])):
            continue
        if not ({resource, "*"} & set(rule.get("resources") or [])):
            continue
        if not ({verb, "*"} & set(rule.get("verbs") or [])):
            continue
        names = rule.get("resourceNames") or []
        if names and name not in names:
            continue
        return True
    return False


def write_grants(rules: list[Obj]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) for every write verb the rules name."""
    return {
        (g, r, v)
        for rule in rules
        for g in rule.get("apiGroups") or []
        for r in rule.get("resources") or []
        for v in rule.get("verbs") or []
        if v in WRITE_VERBS
    }


MONITORING = ["--set", "monitoring.serviceMonitor.enabled=true"]
RULES = ["--set", "monitoring.prometheusRule.enabled=true"]
DASHBOARD = ["--set", "monitoring.grafanaDashboard.enabled=true"]


def args_of(objs: list[Obj], component: str) -> list[str]:
    args: list[str] = container(deployment(objs, component))["args"]
    return [a.replace("$(POD_NAME)", "pod-0") for a in args]


def tls_secret_of_webhook(objs: list[Obj]) -> str:
    """The Secret the webhook serves from: mounted, or read by its renewal (--cert-secret)."""
    volumes = deployment(objs, "webhook")["spec"]["template"]["spec"]["volumes"]
    mounted = [v["secret"]["secretName"] for v in volumes if "secret" in v]
    read = [a.split("=", 1)[1] for a in args_of(objs, "webhook") if a.startswith("--cert-secret=")]
    assert len(mounted + read) == 1, (mounted, read)
    name: str = (mounted + read)[0]
    return name


def pod_specs(objs: list[Obj]) -> list[tuple[str, Obj]]:
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objs
        if o["kind"] in ("Deployment", "Job")
    ]


def dashboard(objs: list[Obj]) -> Obj:
    config = only(objs, "ConfigMap", f"{RELEASE}-zeroscaler-dashboard")
    assert list(config["data"]) == ["zeroscaler.json"]
    board: Obj = json.loads(config["data"]["zeroscaler.json"])
    return board
