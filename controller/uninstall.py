"""`zeroscaler uninstall`: the chart's pre-delete hook, so that uninstalling strands nobody.

In order: the webhook configuration goes (so our own clean-up writes are not annotated again), the
controller is scaled to zero and its Lease waited free (so nothing is put to sleep again), every
Deployment and StatefulSet left asleep at zero is woken to the replicas it would wake to, what
zeroscaler wrote on each workload is removed, and the Lease and the TLS Secret are deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass

from zeroscaler.api import Conflict, Kube, KubeError, NotFound, Obj
from zeroscaler.api.credentials import load_access
from zeroscaler.cluster.events import EventRecorder
from zeroscaler.core.annotations import state_label
from zeroscaler.core.decision import plan_release
from zeroscaler.core.workloads import WORKLOAD_RESOURCES
from zeroscaler.runtime.clock import Clock, LoopClock

log = logging.getLogger(__name__)

ATTEMPTS = 5  # reads and writes of one workload before a conflict counts as a failure
POLL = 1.0  # seconds between looks at the stopping controller


@dataclass(frozen=True, slots=True)
class Options:
    """What the hook tells the command: the release's objects, by name."""

    namespace: str
    controller: str
    lease: str
    webhook_configuration: str
    secret: str = ""
    wait: float = 120.0


@dataclass(slots=True)
class Summary:
    woken: int = 0
    cleaned: int = 0
    failed: int = 0


async def uninstall(
    kube: Kube, options: Options, clock: Clock, say: Callable[[str], None] = print
) -> Summary:
    """Stop zeroscaler acting, then hand every workload back; returns what was done."""
    hooks = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    await _delete(kube, f"{hooks}/{options.webhook_configuration}", say)
    await _stop_controller(kube, options, clock, say)
    summary = Summary()
    events = EventRecorder(kube, clock, "zeroscaler-uninstall")
    for kind, resource in WORKLOAD_RESOURCES.items():
        items, _ = await kube.list_all(f"/apis/apps/v1/{resource}")
        for obj in items:
            await _hand_back(kube, events, kind, resource, obj, summary, say)
    where = f"namespaces/{options.namespace}"
    await _delete(kube, f"/apis/coordination.k8s.io/v1/{where}/leases/{options.lease}", say)
    if options.secret:
        await _delete(kube, f"/api/v1/{where}/secrets/{options.secret}", say)
    return summary


async def _delete(kube: Kube, path: str, say: Callable[[str], None]) -> None:
    try:
        await kube.delete(path)
        say(f"deleted {path.rsplit('/', 2)[-2]} {path.rsplit('/', 1)[-1]}")
    except NotFound:
        pass


async def _stop_controller(
    kube: Kube, options: Options, clock: Clock, say: Callable[[str], None]
) -> None:
    """Scale the controller to zero and wait until no replica runs and none holds the Lease."""
    path = f"/apis/apps/v1/namespaces/{options.namespace}/deployments/{options.controller}"
    try:
        await kube.patch(path + "/scale", {"spec": {"replicas": 0}})
    except NotFound:
        say(f"controller Deployment {options.controller} not found; going on")
    lease_path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{options.namespace}/leases/{options.lease}"
    )
    deadline = clock.monotonic() + options.wait
    seen: tuple[str, str] | None = None
    seen_at = clock.monotonic()
    while True:
        running = await _replicas_running(kube, path)
        holder, renewed, duration = await _lease(kube, lease_path)
        if (holder, renewed) != seen:
            seen, seen_at = (holder, renewed), clock.monotonic()
        # A replica killed without giving the Lease up stops renewing it; it expires.
        lease_free = not holder or clock.monotonic() - seen_at > duration
        if running == 0 and lease_free:
            say("controller stopped")
            return
        if clock.monotonic() > deadline:
            raise TimeoutError(
                f"the controller did not stop within {options.wait:g}s ({running} replicas "
                f"running, Lease held by {holder or 'nobody'}); nothing was woken"
            )
        await asyncio.sleep(POLL)


async def _replicas_running(kube: Kube, path: str) -> int:
    try:
        status = (await kube.get(path)).get("status") or {}
    except NotFound:
        return 0
    return int(status.get("replicas") or 0)


async def _lease(kube: Kube, path: str) -> tuple[str, str, float]:
    try:
        spec = (await kube.get(path)).get("spec") or {}
    except NotFound:
        return "", "", 0.0
    holder = str(spec.get("holderIdentity") or "")
    return holder, str(spec.get("renewTime") or ""), float(spec.get("leaseDurationSeconds") or 15)


async def _hand_back(
    kube: Kube,
    events: EventRecorder,
    kind: str,
    resource: str,
    obj: Obj,
    summary: Summary,
    say: Callable[[str], None],
) -> None:
    """Wake one workload if we left it at zero and remove our annotations, retrying conflicts."""
    meta = obj.get("metadata") or {}
    label = f"{kind} {meta.get('namespace')}/{meta.get('name')}"
    path = f"/apis/apps/v1/namespaces/{meta.get('namespace')}/{resource}/{meta.get('name')}"
    woken = 0
    for _ in range(ATTEMPTS):
        meta = obj.get("metadata") or {}
        replicas = int((obj.get("spec") or {}).get("replicas") or 0)
        plan = plan_release(meta.get("annotations") or {}, replicas, injected=True)
        if plan.wake_to is None and not plan.remove:
            break
        version = {"resourceVersion": meta.get("resourceVersion")}
        try:
            if plan.wake_to is not None:
                scale = await kube.patch(
                    path + "/scale", {"metadata": version, "spec": {"replicas": plan.wake_to}}
                )
                woken = plan.wake_to
                version = {"resourceVersion": (scale.get("metadata") or {}).get("resourceVersion")}
            annotations = dict.fromkeys(plan.remove)
            labels = state_label(None, meta.get("labels") or {})
            body = {"metadata": {**version, "annotations": annotations}}
            if labels:
                body["metadata"]["labels"] = labels
            await kube.patch(path, body)
            break
        except Conflict:
            try:
                obj = await kube.get(path)
            except NotFound:
                return
        except NotFound:
            return
    else:
        summary.failed += 1
        say(f"{label}: kept changing; not handed back")
        return
    if woken:
        summary.woken += 1
        say(f"{label}: woken to {woken} replicas")
        message = f"zeroscaler uninstalled: scaled from 0 to {woken} replicas"
        await events.emit(obj, "apps/v1", kind, "Normal", "Woken", message)
    if plan.remove:
        summary.cleaned += 1
        say(f"{label}: removed {', '.join(plan.remove)}")


def cmd_uninstall(args: argparse.Namespace) -> int:
    """Run the clean-up; a failure exits non-zero so that `helm uninstall` stops and says so."""
    options = Options(
        namespace=args.namespace,
        controller=args.controller,
        lease=args.lease,
        webhook_configuration=args.webhook_configuration,
        secret=args.secret or "",
        wait=args.wait,
    )

    async def run() -> Summary:
        async with Kube(load_access(args.kubeconfig)) as kube:
            return await uninstall(kube, options, LoopClock())

    try:
        summary = asyncio.run(run())
    except (KubeError, TimeoutError) as e:
        print(f"zeroscaler uninstall: {e}", file=sys.stderr)
        return 1
    print(
        f"woke {summary.woken} workloads, removed zeroscaler annotations from {summary.cleaned}"
        + (f", {summary.failed} failed" if summary.failed else "")
    )
    return 1 if summary.failed else 0


def add_uninstall(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler uninstall`."""
    parser = sub.add_parser(
        "uninstall",
        help="before removing zeroscaler: stop it, wake what it put to sleep, remove its traces",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, ~/.kube)")
    parser.add_argument("--namespace", required=True, help="the release's namespace")
    parser.add_argument("--controller", required=True, help="the controller's Deployment")
    parser.add_argument("--lease", required=True, help="the controller's leader-election Lease")
    parser.add_argument(
        "--webhook-configuration", required=True, help="the MutatingWebhookConfiguration"
    )
    parser.add_argument("--secret", help="the webhook's TLS Secret, when zeroscaler wrote it")
    parser.add_argument(
        "--wait", type=float, default=120.0, help="seconds to wait for the controller to stop"
    )
    parser.set_defaults(func=cmd_uninstall)
