"""`zeroscaler check`: prove, from the user's kubeconfig, that the install works.

One line a part: the webhook's pods are reachable (the Service's ready endpoints, or the pods
behind its URL), its caBundle holds the CA it serves under, the API server calls it (a dry-run
Deployment in an opted-in namespace comes back with zeroscaler's annotations), a controller holds
the Lease, the activator answers its probe, and every access the chart's RBAC grants each
ServiceAccount is in effect (SubjectAccessReview). Exit 1 when any fails. Nothing is written: the
Deployment and the Lease are dry runs, the reviews ask only.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
from collections.abc import Awaitable

from zeroscaler.api import NotFound, Obj
from zeroscaler.cli.session import (
    EXIT_FAILED,
    EXIT_OK,
    Failure,
    Session,
    add_connection,
    add_namespace,
    option,
    run,
)
from zeroscaler.core import annotations as a
from zeroscaler.core.coverage import PROBE_LABEL, probe_answered, probe_lease
from zeroscaler.core.install_check import (
    Verdict,
    binds,
    bundle_verdict,
    flag_value,
    injected,
    lease_verdict,
    ready_endpoints,
    reviews_for,
    subject_access_review,
)

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
WEBHOOK = "workloads.zeroscaler.io"
PART_OF = "app.kubernetes.io/part-of=zeroscaler"
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
TLS_VOLUME = "tls"
AT_ONCE = 8  # access reviews in flight


def add_check(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler check`."""
    parser = sub.add_parser(
        "check",
        help="prove the install works: webhook called, controller leading, activator, RBAC",
        description="Check, part by part, that zeroscaler works in this cluster: one line a "
        "part, exit 1 if any fails. Writes nothing (dry runs and access reviews only).",
    )
    add_connection(parser)
    add_namespace(parser)
    parser.add_argument(
        "--instance", metavar="RELEASE", help="the Helm release, when more than one is installed"
    )
    parser.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    return run("check", args, lambda s: check(s, option(args, "namespace"), args.instance))


class Install:
    """The objects of one release of the chart, found by its labels."""

    def __init__(self, configuration: Obj, deployments: list[Obj]) -> None:
        self.configuration = configuration
        labels = (configuration.get("metadata") or {}).get("labels") or {}
        self.instance = str(labels.get(INSTANCE, ""))
        hooks = configuration.get("webhooks") or []
        named = [h for h in hooks if h.get("name") == WEBHOOK]
        self.webhook: Obj = (named or hooks or [{}])[0]
        by_component = {_component(d): d for d in deployments}
        controller = by_component.get("controller")
        if controller is None:
            raise Failure(f"release {self.instance} has no controller Deployment: is it installed?")
        self.controller: Obj = controller
        self.namespace = str(controller["metadata"]["namespace"])
        # Mode combined: the controller's pods serve the webhook too.
        self.serving: Obj = by_component.get("webhook", controller)
        self.mode = "split" if "webhook" in by_component else "combined"

    @property
    def name(self) -> str:
        return str(self.configuration["metadata"]["name"])


async def check(session: Session, namespace: str | None, instance: str | None) -> int:
    install = await find_install(session, instance)
    print(f"zeroscaler {install.instance} in namespace {install.namespace} (mode {install.mode})")
    steps: list[tuple[str, Awaitable[Verdict]]] = [
        ("webhook endpoints", endpoints(session, install)),
        ("webhook certificate", certificate(session, install)),
        ("webhook called", admission(session, install, namespace)),
        ("controller leads", leading(session, install)),
        ("activator", activator(session, install)),
    ]
    steps += [(f"rbac {acc}", rbac(session, install, acc)) for acc in _accounts(install)]
    verdicts: list[Verdict] = []
    for part, step in steps:  # in order: each line is printed as soon as it is known
        try:
            verdicts.append(await step)
        except Failure as e:  # access denied, say: that part is not proven
            verdicts.append(Verdict(part, False, str(e)))
        print(verdicts[-1].line(), flush=True)
    failed = [v for v in verdicts if not v.ok]
    if failed:
        parts = ", ".join(v.part for v in failed)
        print(f"{len(failed)} of {len(verdicts)} checks failed: {parts}")
        return EXIT_FAILED
    print(f"all {len(verdicts)} checks passed")
    return EXIT_OK


async def find_install(session: Session, instance: str | None) -> Install:
    selector = f"{PART_OF},{COMPONENT}=webhook" + (f",{INSTANCE}={instance}" if instance else "")
    found = await session.list(CONFIGURATIONS, params={"labelSelector": selector})
    if not found:
        which = f" of release {instance}" if instance else ""
        raise Failure(
            f"no zeroscaler webhook configuration{which} (label {PART_OF}): is the chart "
            "installed? (helm list -A)"
        )
    if len(found) > 1:
        names = sorted(str((c["metadata"].get("labels") or {}).get(INSTANCE)) for c in found)
        raise Failure(
            f"{len(found)} zeroscaler releases ({', '.join(names)}): pick one with --instance"
        )
    labels = found[0]["metadata"].get("labels") or {}
    selector = f"{PART_OF},{INSTANCE}={labels.get(INSTANCE, '')}"
    deployments = await session.list(
        "/apis/apps/v1/deployments", params={"labelSelector": selector}
    )
    return Install(found[0], deployments)


async def endpoints(session: Session, install: Install) -> Verdict:
    part = "webhook endpoints"
    client = install.webhook.get("clientConfig") or {}
    service = client.get("service")
    if isinstance(service, dict):
        ns, name = service.get("namespace", install.namespace), service.get("name", "")
        slices = await session.list(
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            params={"labelSelector": f"kubernetes.io/service-name={name}"},
        )
        ready = ready_endpoints(slices)
        if not ready:
            return Verdict(
                part,
                False,
                f"Service {ns}/{name} has no ready endpoints: no webhook pod behind it is Ready "
                f"(kubectl -n {ns} get pods -l {INSTANCE}={install.instance})",
            )
        return Verdict(part, True, f"Service {ns}/{name} has {ready} ready endpoint(s)")
    ready, url = _ready(install.serving), client.get("url", "?")
    where = f"Deployment {install.namespace}/{install.serving['metadata']['name']}"
    if not ready:
        return Verdict(part, False, f"no Ready pod of {where} serves {url}")
    return Verdict(part, True, f"{ready} Ready pod(s) of {where} serve {url}")


async def certificate(session: Session, install: Install) -> Verdict:
    volumes = install.serving["spec"]["template"]["spec"].get("volumes") or []
    names = [
        v["secret"]["secretName"] for v in volumes if v.get("name") == TLS_VOLUME and "secret" in v
    ]
    secret = f"{install.namespace}/{names[0]}" if names else "(none mounted)"
    data: dict[str, str] | None = None
    if names:
        path = f"/api/v1/namespaces/{install.namespace}/secrets/{names[0]}"
        try:
            data = dict((await session.get(path)).get("data") or {})
        except NotFound:
            return Verdict("webhook certificate", False, f"Secret {secret} does not exist")
        except Failure:
            data = None  # may not read Secrets: the bundle is still checked for form
    bundle = str(install.webhook.get("clientConfig", {}).get("caBundle") or "")
    return bundle_verdict(bundle, f"MutatingWebhookConfiguration {install.name}", secret, data)


async def admission(session: Session, install: Install, namespace: str | None) -> Verdict:
    part = "webhook called"
    if namespace is None:
        opted = await session.list(
            "/api/v1/namespaces", params={"labelSelector": f"{a.NAMESPACE_ENABLED_LABEL}=true"}
        )
        names = sorted(
            str(n["metadata"]["name"]) for n in opted if n["metadata"]["name"] != install.namespace
        )
        if not names:
            return Verdict(
                part,
                False,
                "no namespace is opted in yet: label one (kubectl label namespace NS "
                f"{a.NAMESPACE_ENABLED_LABEL}=true), or name one with -n",
            )
        namespace = names[0]
    else:
        try:
            labels = (await session.get(f"/api/v1/namespaces/{namespace}"))["metadata"].get(
                "labels"
            ) or {}
        except NotFound:
            return Verdict(part, False, f"namespace {namespace} does not exist")
        if labels.get(a.NAMESPACE_ENABLED_LABEL) != "true":
            return Verdict(
                part,
                False,
                f"namespace {namespace} is not opted in (label {a.NAMESPACE_ENABLED_LABEL}=true)",
            )
    name = f"zeroscaler-check-{secrets.token_hex(3)}"
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    answer = await session.call("POST", path, session.kube.create(path, _probe(name), dry_run=True))
    found = injected(answer)
    if not found:
        return Verdict(
            part,
            False,
            f"a dry-run Deployment in {namespace} came back without zeroscaler's annotations: the "
            "API server did not reach the webhook (see the lines above), or policy gives that "
            "namespace nothing",
        )
    said = ", ".join(f"{k.removeprefix(a.PREFIX)}={v}" for k, v in found.items() if k != a.INJECTED)
    return Verdict(part, True, f"a dry-run Deployment in {namespace} came back with {said}")


async def leading(session: Session, install: Install) -> Verdict:
    deployment = install.controller
    where = f"Deployment {install.namespace}/{deployment['metadata']['name']}"
    if not _ready(deployment):
        wanted = (deployment.get("spec") or {}).get("replicas", 1)
        return Verdict(
            "controller leads", False, f"{where} has no Ready replica (spec.replicas {wanted})"
        )
    lease_name = "?"
    for container in deployment["spec"]["template"]["spec"].get("containers") or []:
        lease_name = flag_value(container.get("args") or [], "--lease-name") or lease_name
    path = f"/apis/coordination.k8s.io/v1/namespaces/{install.namespace}/leases/{lease_name}"
    try:
        lease: Obj | None = await session.get(path)
    except NotFound:
        lease = None
    return lease_verdict(lease, f"{install.namespace}/{lease_name}", await session.now())


async def activator(session: Session, install: Install) -> Verdict:
    part = "activator"
    selector = f"{PART_OF},{COMPONENT}=activator,{INSTANCE}={install.instance}"
    found = await session.list(CONFIGURATIONS, params={"labelSelector": selector})
    if not found:
        return Verdict(part, True, "not installed (activator.enabled is false)")
    name = found[0]["metadata"]["name"]
    tokens = [
        ((h.get("objectSelector") or {}).get("matchLabels") or {}).get(PROBE_LABEL)
        for h in found[0].get("webhooks") or []
    ]
    token = next((t for t in tokens if t), None)
    if token is None:
        return Verdict(
            part,
            False,
            f"MutatingWebhookConfiguration {name} has no probe yet: the leading controller "
            "writes it once it leads",
        )
    path = f"/apis/coordination.k8s.io/v1/namespaces/{install.namespace}/leases"
    work = session.kube.create_warnings(path, probe_lease(token))
    warnings = await session.call("POST", path, work)
    if not probe_answered(warnings, str(token)):
        return Verdict(
            part,
            False,
            f"a dry-run Lease its probe covers came back unanswered: the API server does not "
            f"reach the activator of {name}",
        )
    return Verdict(part, True, f"answers its probe ({name})")


def _accounts(install: Install) -> list[str]:
    seen: dict[str, None] = {}
    for deployment in (install.controller, install.serving):
        account = deployment["spec"]["template"]["spec"].get("serviceAccountName") or "default"
        seen[str(account)] = None
    return list(seen)


async def rbac(session: Session, install: Install, account: str) -> Verdict:
    part = f"rbac {account}"
    selector = {"labelSelector": f"{PART_OF},{INSTANCE}={install.instance}"}
    cluster = await session.list(f"{RBAC}/clusterrolebindings", params=selector)
    local = await session.list(f"{RBAC}/rolebindings", params=selector)
    reviews = []
    for binding in [*cluster, *local]:
        if not binds(binding, account, install.namespace):
            continue
        ref = binding.get("roleRef") or {}
        binding_ns = str(binding["metadata"].get("namespace") or "")
        if ref.get("kind") == "ClusterRole":
            role_path = f"{RBAC}/clusterroles/{ref.get('name')}"
        else:
            role_path = f"{RBAC}/namespaces/{binding_ns}/roles/{ref.get('name')}"
        try:
            role = await session.get(role_path)
        except NotFound:
            return Verdict(
                part,
                False,
                f"{binding['metadata']['name']} binds {ref.get('kind')} {ref.get('name')}, "
                "which does not exist",
            )
        reviews += reviews_for(role.get("rules") or [], binding_ns)
    if not reviews:
        return Verdict(
            part,
            False,
            f"no binding of release {install.instance} grants ServiceAccount "
            f"{install.namespace}/{account} anything",
        )
    gate = asyncio.Semaphore(AT_ONCE)

    async def allowed(body: Obj) -> bool:
        async with gate:
            answer = await session.create(REVIEWS, body)
        return bool((answer.get("status") or {}).get("allowed"))

    bodies = [subject_access_review(account, install.namespace, r) for r in reviews]
    answers = await asyncio.gather(*(allowed(b) for b in bodies))
    denied = [str(r) for r, ok in zip(reviews, answers, strict=True) if not ok]
    if denied:
        shown = "; ".join(denied[:3]) + ("; ..." if len(denied) > 3 else "")
        return Verdict(
            part,
            False,
            f"{len(denied)} of {len(reviews)} accesses the chart grants are not in effect: {shown}",
        )
    return Verdict(part, True, f"all {len(reviews)} accesses the chart grants are in effect")


def _ready(deployment: Obj) -> int:
    return int((deployment.get("status") or {}).get("readyReplicas") or 0)


def _component(deployment: Obj) -> str:
    return str(((deployment.get("metadata") or {}).get("labels") or {}).get(COMPONENT, ""))


def _probe(name: str) -> Obj:
    """A Deployment that is never created (dry run) and could not run if it were."""
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "check", "image": "zeroscaler.invalid/check"}]},
            },
        },
    }
