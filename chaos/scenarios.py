"""Fault scenarios against a control plane of their own, checked by `chaos.invariants`.

Each scenario puts workloads to sleep, breaks something (the API server, etcd, the controller,
the leader, the workload's other writers), makes activity, and lets the `Observer` judge. Sizes are
small in `make test` (tests/system/test_chaos.py) and full in `make chaos`
(`python -m chaos`), which prints a table and writes bench/results/chaos.json. Every
scenario is bounded in time: it stops at its deadline whatever it has done.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import random
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from chaos.invariants import Observer, Report, Unsettled, wait_settled
from localcluster import build
from localcluster.cluster import Cluster, start
from testkit.controller import (
    ControllerProcess,
    config_for,
    create_configmap,
    create_workload,
    grant_watch,
    start_controller,
)
from testkit.crds import create_crd
from testkit.namespaces import publish_root_ca
from testkit.relay import CuttableRelay
from testkit.waiting import wait_for
from testkit.webhook import Webhook

REPLICAS = 3
TIMEOUT = 3.0  # seconds idle before a sleep
BOUND = 15.0  # seconds after the controller can see activity by which its workload must be awake
RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "chaos.json"


@dataclass(frozen=True)
class Size:
    """How much of a scenario to run."""

    workloads: int
    runs: int
    deadline: float  # seconds


SHORT = Size(workloads=3, runs=1, deadline=120.0)
FULL = Size(workloads=10, runs=5, deadline=600.0)


@dataclass
class Outcome:
    """One scenario's row in the table."""

    scenario: str
    runs: int
    report: Report
    note: str = ""

    def row(self) -> dict[str, object]:
        r = self.report
        return {
            "scenario": self.scenario,
            "runs": self.runs,
            "wakes_expected": r.wakes_expected,
            "wakes_observed": r.wakes_observed,
            "violations": len(r.violations),
            "worst_wake_delay_s": None if r.worst_delay is None else round(r.worst_delay, 2),
            "note": self.note,
            "first_violations": r.violations[:5],
        }


class Stage:
    """One scenario's namespace, workloads, controllers and observer on a cluster."""

    def __init__(
        self, cluster: Cluster, workdir: Path, name: str, size: Size, interval: float = 0.2
    ) -> None:
        self.cluster = cluster
        self.size = size
        self.api = new_api(cluster)
        self.ns = f"chaos-{name}-{secrets.token_hex(3)}"
        self.workdir = workdir / self.ns
        self.workdir.mkdir(parents=True)
        self.began = time.monotonic()
        self.controllers: list[ControllerProcess] = []
        self.ended: dict[str, datetime] = {}
        self.observer = Observer(lambda: new_api(cluster), self.ns, interval)
        self.names = [f"op-{i}" for i in range(size.workloads)]
        self._started = 0

    def setup(self) -> None:
        """The namespace opted in, and workloads that watch its ConfigMaps."""
        core = k8s.CoreV1Api(self.api)
        labels = {"zeroscaler.io/enabled": "true"}
        core.create_namespace({"metadata": {"name": self.ns, "labels": labels}})
        publish_root_ca(core, self.ns, self.cluster.ca_file.read_text())
        grant_watch(self.api, self.ns, [("", ["configmaps"])])
        config = config_for(f"{TIMEOUT:g}s", "ConfigMap", watch_namespaces=self.ns)
        for name in self.names:
            create_workload(self.api, self.ns, name, config, replicas=REPLICAS)
            self.observer.expect(name, REPLICAS, TIMEOUT)
        self._wait_running()

    def _wait_running(self) -> None:
        """Until every workload's pods are Ready, before any controller starts.

        After a scenario that took the API server or etcd away, the controller manager's, the
        scheduler's and kwok's watches back off for up to a minute before they list again, and
        the pods made meanwhile wait for them (in one CI run, 61 s: the workloads were still not
        Ready when the scenario's 60 s wait for their first sleep ended). That recovery is the
        cluster's, not zeroscaler's, so the scenario begins after it.
        """
        apps = k8s.AppsV1Api(self.api)

        def running() -> bool:
            items = apps.list_namespaced_deployment(self.ns).items
            ready = {d.metadata.name for d in items if (d.status.ready_replicas or 0) >= REPLICAS}
            return ready >= set(self.names)

        wait_for(running, f"every workload in {self.ns} running", timeout=180.0)

    def controller(
        self,
        id: str = "pod-0",
        *,
        wait_leader: bool = True,
        via: Cluster | None = None,
        extra: Sequence[str] = (),
    ) -> ControllerProcess:
        """Start a controller (reaching the API server `via` another kubeconfig); each process
        logs to a file of its own."""
        self._started += 1
        workdir = self.workdir / f"run-{self._started}"
        workdir.mkdir()
        ctl = start_controller(
            via or self.cluster,
            self.ns,
            workdir,
            id=id,
            wait_leader=wait_leader,
            extra=["--log-level", "info", "--access-review-ttl", "30", *extra],
        )
        self.controllers.append(ctl)
        return ctl

    def kill(self, ctl: ControllerProcess, sig: int = signal.SIGKILL) -> None:
        ctl.stop(sig)
        self.ended[str(ctl.log)] = datetime.now(UTC)

    def touch(self, what: str = "") -> None:
        """Activity for every workload: a ConfigMap created in their namespace (retried while
        the API server or etcd is still coming back)."""
        name = f"change-{what or secrets.token_hex(4)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                create_configmap(self.api, self.ns, name)
                break
            except k8s.ApiException as e:
                if e.status == 409:
                    break
                if time.monotonic() > deadline:
                    raise
            except Exception:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
        self.observer.activity()

    def all_asleep(self, timeout: float = 60.0) -> None:
        """Wait until the observer has seen every workload asleep: what the scenario does next
        is activity the checker then knows each workload must wake for."""
        wait_for(self.observer.seen_asleep, f"every workload in {self.ns} asleep", timeout=timeout)

    def all_awake(self, timeout: float = BOUND + 5) -> None:
        """Wait until every workload has been seen awake since the call (not all at once: with a
        short timeout the first woken may sleep again before the last wakes)."""
        seen: set[str] = set()

        def awake() -> bool:
            items = k8s.AppsV1Api(self.api).list_namespaced_deployment(self.ns).items
            seen.update(
                d.metadata.name
                for d in items
                if (d.metadata.annotations or {}).get("zeroscaler.io/state", "awake") == "awake"
                and d.spec.replicas == REPLICAS
            )
            return seen >= set(self.names)

        wait_for(awake, f"every workload in {self.ns} awake", timeout=timeout)

    def time_left(self) -> bool:
        return time.monotonic() - self.began < self.size.deadline

    def finish(self, scenario: str, runs: int, note: str = "") -> Outcome:
        """Let everything settle, stop the controllers, check the invariants; what did not
        settle is a violation, reported with what the observer saw."""
        unsettled = None
        try:
            wait_settled(self.observer, timeout=BOUND + TIMEOUT * 2)
        except Unsettled as e:
            unsettled = str(e)
        self.observer.stop()
        for ctl in self.controllers:
            if ctl.alive():
                self.kill(ctl, signal.SIGTERM)
        logs = [c.log for c in self.controllers]
        report = self.observer.check(BOUND, logs, self.ended)
        if unsettled is not None:
            report.violations.append(unsettled)
        with contextlib.suppress(Exception):
            k8s.CoreV1Api(self.api).delete_namespace(self.ns)
        self.api.close()
        return Outcome(scenario, runs, report, note)

    def abort(self) -> None:
        self.observer.stop()
        for ctl in self.controllers:
            ctl.stop(signal.SIGKILL)
        self.api.close()


def new_api(cluster: Cluster) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))


@contextlib.contextmanager
def staged(
    cluster: Cluster, workdir: Path, name: str, size: Size, interval: float = 0.2
) -> Iterator[Stage]:
    stage = Stage(cluster, workdir, name, size, interval)
    try:
        stage.setup()
        with stage.observer:
            yield stage
    except BaseException:
        stage.abort()
        raise


def component_restarts(
    cluster: Cluster,
    workdir: Path,
    size: Size,
    component: str,
    repeats: int = 1,
    down: float = 0.0,
) -> Outcome:
    """Workloads asleep; `component` SIGKILLed (left down `down` s) and restarted `repeats` times
    in a row while the controller's watches are open; a change made once it is back wakes them."""
    label = f"{component} SIGKILL" + (f" x{repeats} in a row" if repeats > 1 else "")
    label += f", down {down:g} s" if down else ""
    with staged(cluster, workdir, f"{component[-9:]}-{repeats}-{down:g}", size) as stage:
        stage.controller()
        runs = 0
        while runs < size.runs and stage.time_left():
            stage.all_asleep()
            stage.observer.fault()
            for _ in range(repeats):
                cluster.restart(component, down=down)
            stage.observer.recovered()
            stage.touch(f"{runs}")
            stage.all_awake()
            runs += 1
        return stage.finish(label, runs)


def relist_after_gone(cluster: Cluster, workdir: Path, size: Size) -> Outcome:
    """The controller frozen (SIGSTOP) while a watched object is deleted and the API server
    restarts: its watches resume from a resourceVersion the new server no longer has (410 Gone),
    list again, and the deletion found by the list wakes the sleepers."""
    with staged(cluster, workdir, "relist", size) as stage:
        ctl = stage.controller()
        runs = 0
        while runs < size.runs and stage.time_left():
            create_configmap(stage.api, stage.ns, f"doomed-{runs}")
            stage.observer.activity()
            stage.all_asleep()
            stage.observer.fault()
            os.kill(ctl.proc.pid, signal.SIGSTOP)
            try:
                k8s.CoreV1Api(stage.api).delete_namespaced_config_map(f"doomed-{runs}", stage.ns)
                stage.observer.activity()
                cluster.restart("kube-apiserver")
            finally:
                os.kill(ctl.proc.pid, signal.SIGCONT)
            stage.observer.recovered()
            stage.all_awake()
            runs += 1
        return stage.finish("watch 410 Gone, re-list", runs, "deletion seen by the re-list")


def cut_streams(cluster: Cluster, workdir: Path, size: Size) -> Outcome:
    """The controller reaches the API server through a relay that cuts every open connection just
    after a watched object is deleted, while its DELETED event may still be on the wire."""
    rng = random.Random(3)
    port = int(cluster.server.rsplit(":", 1)[1])
    relay = CuttableRelay(port)
    config = json.loads(cluster.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    via = dataclasses.replace(cluster, kubeconfig=workdir / f"relay-{relay.port}.kubeconfig")
    workdir.mkdir(parents=True, exist_ok=True)
    via.kubeconfig.write_text(json.dumps(config))
    try:
        with staged(cluster, workdir, "cut", size) as stage:
            stage.controller(via=via)
            runs = 0
            while runs < size.runs and stage.time_left():
                create_configmap(stage.api, stage.ns, f"cut-{runs}")
                stage.observer.activity()
                stage.all_asleep()
                core = k8s.CoreV1Api(stage.api)
                core.delete_namespaced_config_map(f"cut-{runs}", stage.ns)
                stage.observer.activity()
                time.sleep(rng.uniform(0.0, 0.05))
                relay.cut()
                stage.all_awake()
                runs += 1
            return stage.finish("watch streams cut mid-event", runs, f"{relay.cuts} cuts")
    finally:
        relay.close()


POLICY = """
defaults: {idleTimeout: 3s}
bounds: {minIdleTimeout: 1s}
"""


def webhook_outages(cluster: Cluster, workdir: Path, size: Size) -> Outcome:
    """Workloads created while the webhook is stopped, restarted, and serving a rotated
    certificate (failurePolicy Ignore admits them all); each still ends up annotated from policy
    and managed (by the controller where the webhook missed it): asleep, then woken by activity."""
    with staged(cluster, workdir, "webhook", Size(0, size.runs, size.deadline)) as stage:
        core = k8s.CoreV1Api(stage.api)
        policy_ns = f"{stage.ns}-policy"
        core.create_namespace({"metadata": {"name": policy_ns}})
        labels = {"zeroscaler.io/policy": "true"}
        body = {"metadata": {"name": "policy", "labels": labels}, "data": {"policy.yaml": POLICY}}
        core.create_namespaced_config_map(policy_ns, body)
        stage.workdir.joinpath("webhook").mkdir()
        hook = Webhook(cluster, stage.workdir / "webhook", policy_ns)
        hook.start()
        hook.register(stage.api, "Ignore")
        hook.enrol(stage.api, stage.ns)
        stage.controller(extra=["--policy-namespace", policy_ns])
        made = 0

        def create(what: str, count: int) -> None:
            nonlocal made
            for _ in range(count):
                name = f"{what}-{made}"
                create_workload(stage.api, stage.ns, name, {}, replicas=REPLICAS)
                stage.observer.expect(name, REPLICAS, TIMEOUT)
                stage.names.append(name)
                made += 1

        try:
            runs = 0
            per_step = max(1, size.workloads // 3)
            while runs < size.runs and stage.time_left():
                hook.stop()
                create("down", per_step)
                hook.start()
                create("back", per_step)
                hook.write_certs()  # a new serving pair from the same CA, read from disk
                create("rotated", per_step)
                runs += 1
            stage.all_asleep(timeout=90)
            stage.touch("after")
            stage.all_awake()
        finally:
            hook.unregister(stage.api)
            hook.stop()
            with contextlib.suppress(Exception):
                core.delete_namespace(policy_ns)
        return stage.finish("webhook stopped, restarted, cert rotated", runs, f"{made} created")


def controller_kills(cluster: Cluster, workdir: Path, size: Size) -> Outcome:
    """The controller SIGKILLed at a random moment of a sleep or of a wake, and restarted in the
    same pod (same id), `4 x runs` times; kills alternate between the two."""
    rng = random.Random(12)
    kills = 4 * size.runs
    with staged(cluster, workdir, "kill", size) as stage:
        ctl = stage.controller()
        done = 0
        while done < kills and stage.time_left():
            if done % 2 == 0:  # around the moment the idle timeout runs out
                stage.all_awake(timeout=BOUND + TIMEOUT)
                time.sleep(rng.uniform(TIMEOUT - 0.5, TIMEOUT + 0.5))
            else:  # just after activity reached a sleeping workload
                stage.all_asleep()
                stage.touch(f"{done}")
                time.sleep(rng.uniform(0.0, 0.3))
            stage.observer.fault()
            stage.kill(ctl)
            ctl = stage.controller()
            stage.observer.recovered()
            done += 1
        return stage.finish("controller SIGKILL in a sleep or a wake", done)


def leader_failovers(cluster: Cluster, workdir: Path, size: Size) -> Outcome:
    """Two replicas; the leader SIGKILLed while activity goes on; the standby takes over."""
    with staged(cluster, workdir, "failover", size) as stage:
        leader = stage.controller("replica-a")
        standby = stage.controller("replica-b", wait_leader=False)
        runs = 0
        stop = threading.Event()
        while runs < size.runs and stage.time_left():
            stage.all_asleep()
            stop.clear()
            busy = threading.Thread(target=_keep_busy, args=(stage, stop), daemon=True)
            busy.start()
            time.sleep(0.5)
            stage.observer.fault()
            stage.kill(leader)
            wait_for(standby.is_leader, "the standby leading", timeout=30)
            stage.observer.recovered()
            time.sleep(1.0)
            stop.set()
            busy.join()
            stage.all_awake()
            leader, standby = standby, stage.controller(leader.id, wait_leader=False)
            runs += 1
        stop.set()
        return stage.finish("leader failover with activity", runs)


def _keep_busy(stage: Stage, stop: threading.Event) -> None:
    api = new_api(stage.cluster)
    try:
        n = 0
        while not stop.is_set():
            body = {"metadata": {"name": f"busy-{secrets.token_hex(4)}"}, "data": {"n": str(n)}}
            k8s.CoreV1Api(api).create_namespaced_config_map(stage.ns, body)
            stage.observer.activity()
            n += 1
            stop.wait(0.25)
    finally:
        api.close()


def conflicting_writers(cluster: Cluster, workdir: Path, size: Size) -> Outcome:
    """Another actor scales the workloads and edits their annotations at random moments, around
    the controller's own sleeps and wakes; the restore count follows the actor's last scale.
    Each run begins with activity once every workload is seen asleep, so it asks a wake of each."""
    rng = random.Random(7)
    with staged(cluster, workdir, "writers", size) as stage:
        stage.controller()
        apps = k8s.AppsV1Api(stage.api)
        runs = edits = 0
        while runs < size.runs and stage.time_left():
            stage.all_asleep()
            stage.touch(f"run-{runs}")
            for _ in range(4):
                time.sleep(rng.uniform(0.5, TIMEOUT + 1.0))
                name = rng.choice(stage.names)
                dice = rng.random()
                if dice < 0.2:
                    stage.touch(f"{edits}")
                elif dice < 0.6:
                    count = rng.choice((2, 3, 4))
                    with contextlib.suppress(k8s.ApiException):
                        apps.patch_namespaced_deployment_scale(
                            name, stage.ns, {"spec": {"replicas": count}}
                        )
                        stage.observer.set_replicas(name, count)
                else:
                    body = {"metadata": {"annotations": {"example.com/touched": str(edits)}}}
                    apps.patch_namespaced_deployment(name, stage.ns, body)
                edits += 1
            runs += 1
        note = f"{edits} scale and annotation edits"
        return stage.finish("conflicting writers", runs, note)


SOAK_GROUP = "soak.zs-test.example.com"


@dataclass(frozen=True)
class Soak:
    """How big and long a soak is."""

    workloads: int = 1000
    types: int = 50
    minutes: float = 10.0
    kinds_each: int = 3  # watched kinds per workload
    every: float = 8.0  # seconds between one workload's activities, on average
    pods: bool = False  # Deployments that make Pods (on kwok), not paused ones
    # Objects of a type kept at most: past that, an activity deletes the type's oldest instead
    # of creating one, so memory is measured against a cluster that stops growing.
    kept: int = 10


def soak(cluster: Cluster, workdir: Path, size: Soak) -> tuple[Outcome, dict[str, object]]:
    """Many workloads over many watched types, random activity with timeouts of a few seconds
    (objects created, and deleted once a type holds `size.kept`); the controller's memory and CPU
    and the load average sampled each minute (and at the start and the end); the API server's
    own request counts and latencies over the run.

    The Deployments are paused unless `size.pods`: they scale as API objects, and the API server's
    capacity goes to the controller's work rather than to Pods made and removed on kwok (on 2
    cores that churn was most of the API server's requests)."""
    rng = random.Random(5)
    api = new_api(cluster)
    plurals = [f"soaks{i}" for i in range(size.types)]
    for i, plural in enumerate(plurals):
        create_crd(api, SOAK_GROUP, f"Soak{i}", plural)
    api.close()
    name = "soak"
    # The observer's watch sees every change; its list is the safety net, and at 1,000 a list
    # a second would cost the machine more than the controller does.
    interval = max(1.0, size.workloads / 200)
    with staged(cluster, workdir, name, Size(0, 1, size.minutes * 60 + 600), interval) as stage:
        grant_watch(stage.api, stage.ns, [(SOAK_GROUP, plurals)], name="soak-watch")
        watchers: dict[str, list[str]] = {plural: [] for plural in plurals}
        for i in range(size.workloads):
            timeout = rng.choice((3, 4, 5))
            chosen = rng.sample(range(size.types), min(size.kinds_each, size.types))
            kinds = ", ".join(f"Soak{k}.{SOAK_GROUP}" for k in chosen)
            workload = f"soak-{i}"
            config = config_for(f"{timeout}s", kinds, watch_namespaces=stage.ns)
            create_workload(stage.api, stage.ns, workload, config, replicas=1, paused=not size.pods)
            stage.observer.expect(workload, 1, timeout)
            stage.names.append(workload)
            for k in chosen:
                watchers[plurals[k]].append(workload)
        # The default access-answer lifetime, not the tests' one second: at 1,000 workloads that
        # second made the reviews a steady load of their own.
        ctl = stage.controller(extra=["--access-review-ttl", "60"])
        # Activity starts once all are asleep: from then on the checker knows every wake it asks.
        stage.all_asleep(timeout=60 + size.workloads / 5)
        custom = k8s.CustomObjectsApi(stage.api)
        samples = [_usage(ctl, 0.0)]
        served = _served(stage.api)
        began = time.monotonic()
        next_sample = began + 60
        made = deleted = 0
        held: dict[str, collections.deque[str]] = {p: collections.deque() for p in plurals}
        gap = size.kinds_each * size.every / size.types  # between activities, of any type
        # Each type first once, in a random order: then every workload has activity to judge.
        first = rng.sample(plurals, len(plurals))
        while first or time.monotonic() - began < size.minutes * 60:
            plural = first.pop() if first else rng.choice(plurals)
            sent = datetime.now(UTC)
            if len(held[plural]) >= size.kept:
                oldest = held[plural].popleft()
                custom.delete_namespaced_custom_object(SOAK_GROUP, "v1", stage.ns, plural, oldest)
                deleted += 1
            else:
                body = {
                    "apiVersion": f"{SOAK_GROUP}/v1",
                    "kind": f"Soak{plurals.index(plural)}",
                    "metadata": {"name": f"o-{made}"},
                }
                custom.create_namespaced_custom_object(SOAK_GROUP, "v1", stage.ns, plural, body)
                held[plural].append(f"o-{made}")
                made += 1
            stage.observer.activity(watchers[plural], began=sent)
            time.sleep(min(rng.expovariate(1 / gap), 4 * gap) * _ramp(time.monotonic() - began))
            if time.monotonic() >= next_sample:
                samples.append(_usage(ctl, time.monotonic() - began))
                next_sample += 60
        samples.append(_usage(ctl, time.monotonic() - began))
        requests = _requests(served, _served(stage.api), time.monotonic() - began)
        time.sleep(BOUND)  # the last activity's wakes, before the observer stops
        note = (
            f"{size.workloads} workloads, {size.types} types, {made} objects created and "
            f"{deleted} deleted (at most {size.kept} of a type), "
            f"activity every {size.every:g} s, {'Pods' if size.pods else 'paused'}"
        )
        outcome = stage.finish(f"soak, {size.minutes:g} min", 1, note)
        writes = _writes(ctl.log)
    return outcome, {"samples": samples, "controller": writes, "apiserver": requests}


SOAK_RAMP = 60.0  # seconds over which the soak's activity comes up to its rate


def _ramp(elapsed: float) -> float:
    """How much longer than its rate the soak waits between activities `elapsed` s in: 4x at
    first, 1x after SOAK_RAMP. Its activity starts with every workload asleep, and at once at
    its full rate (1,000 workloads, every 8 s) that asks ~125 wakes a second of an API server
    that writes ~40 here: the wakes' records then came up to 17 s late in the first 20 s."""
    return 1.0 + 3.0 * max(0.0, 1.0 - elapsed / SOAK_RAMP)


def _usage(ctl: ControllerProcess, at: float) -> dict[str, float]:
    """The controller's resident memory (MiB) and CPU seconds so far, and the load average."""
    status = Path(f"/proc/{ctl.proc.pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    fields = Path(f"/proc/{ctl.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    load = os.getloadavg()[0]
    return {
        "minute": round(at / 60, 1),
        "rss_mib": round(rss / 1024, 1),
        "cpu_s": round(cpu, 1),
        "load1": round(load, 1),
    }


_DURATION = re.compile(r"^apiserver_request_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _served(api: k8s.ApiClient) -> dict[str, list[float]]:
    """The API server's requests so far by verb and resource: [count, seconds in all]."""
    method, url, headers, _, _ = api.param_serialize(
        "GET", "/metrics", auth_settings=["BearerToken"]
    )
    resp = api.call_api(method, url, headers)
    resp.read()
    totals: dict[str, list[float]] = {}
    for line in resp.data.decode().splitlines():
        m = _DURATION.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m[2]))
        if labels.get("verb") in ("WATCH", "CONNECT"):
            continue  # open for minutes: their duration is not a latency
        resource = labels.get("resource", "") + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        entry = totals.setdefault(f"{labels.get('verb', '')} {resource}", [0.0, 0.0])
        entry[0 if m[1] == "count" else 1] += float(m[3])
    return totals


def _requests(
    before: dict[str, list[float]], after: dict[str, list[float]], seconds: float
) -> list[dict[str, object]]:
    """What the API server served between two readings: per second and mean latency, busiest
    first (everyone's requests: the controller's, kube-controller-manager's, the soak's)."""
    rows: list[dict[str, object]] = []
    for key, (count, total) in after.items():
        done = count - before.get(key, [0.0, 0.0])[0]
        spent = total - before.get(key, [0.0, 0.0])[1]
        if done >= 1:
            rows.append(
                {
                    "request": key,
                    "per_s": round(done / seconds, 1),
                    "mean_ms": round(spent / done * 1000, 1),
                }
            )
    rows.sort(key=lambda r: -float(str(r["per_s"])))
    everything = sum(float(str(r["per_s"])) for r in rows)
    return [{"request": "all", "per_s": round(everything, 1)}, *rows[:12]]


def _writes(log: Path) -> dict[str, float]:
    """The controller's sleeps and wakes from its log, and its wake latency (from the watch
    event to the scale write's answer) p50, p99 and max in seconds."""
    text = log.read_text(errors="replace")
    latencies = sorted(float(v) / 1000 for v in re.findall(r" latency_ms=([\d.]+)", text))

    def quantile(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2)

    found: dict[str, float] = {
        "sleeps": len(re.findall(r" msg=sleeping ", text)),
        "wakes": len(re.findall(r" msg=woken ", text)),
    }
    if latencies:
        found |= {
            "wake_p50_s": quantile(0.5),
            "wake_p99_s": quantile(0.99),
            "wake_max_s": round(latencies[-1], 2),
        }
    return found


Scenario = Callable[[Cluster, Path, Size], Outcome]
SCENARIOS: dict[str, Scenario] = {
    "apiserver": lambda c, w, s: component_restarts(c, w, s, "kube-apiserver"),
    "apiserver-repeated": lambda c, w, s: component_restarts(c, w, s, "kube-apiserver", 3),
    "apiserver-down": lambda c, w, s: component_restarts(c, w, s, "kube-apiserver", down=20),
    "etcd": lambda c, w, s: component_restarts(c, w, s, "etcd"),
    "relist": relist_after_gone,
    "cut": cut_streams,
    "webhook": webhook_outages,
    "controller-kill": controller_kills,
    "failover": leader_failovers,
    "writers": conflicting_writers,
}


def own_cluster(progress: Callable[[str], None] | None = None) -> Cluster:
    """A control plane for faults alone: killing its parts harms no other test."""
    binaries = build.ensure_binaries(progress=progress)
    return start(binaries, nodes=1, progress=progress)


def table(outcomes: list[Outcome]) -> str:
    head = (
        "| scenario | runs | wakes expected / observed | invariant violations | worst wake delay |"
    )
    lines = [head, "|---|---|---|---|---|"]
    for o in outcomes:
        r = o.report
        delay = "-" if r.worst_delay is None else f"{r.worst_delay:.1f} s"
        lines.append(
            f"| {o.scenario} | {o.runs} | {r.wakes_expected} / {r.wakes_observed} "
            f"| {len(r.violations)} | {delay} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos")
    parser.add_argument("scenarios", nargs="*", choices=[[], *SCENARIOS], default=[])
    parser.add_argument("--short", action="store_true", help="the sizes `make test` runs")
    parser.add_argument("--logs", type=Path, help="keep the controllers' logs here")
    parser.add_argument(
        "--soak",
        nargs=3,
        type=float,
        metavar=("WORKLOADS", "TYPES", "MINUTES"),
        help="also soak: e.g. 1000 50 10 (run it on a quiet machine)",
    )
    parser.add_argument(
        "--soak-every",
        type=float,
        default=Soak.every,
        metavar="SECONDS",
        help="seconds between one soaked workload's activities, on average",
    )
    parser.add_argument(
        "--soak-pods", action="store_true", help="soaked Deployments make Pods (on kwok)"
    )
    parser.add_argument(
        "--soak-kept",
        type=int,
        default=Soak.kept,
        metavar="N",
        help="objects of a watched type kept at most; past that, activity deletes the oldest",
    )
    args = parser.parse_args()
    size = SHORT if args.short else FULL
    chosen = args.scenarios or ([] if args.soak else list(SCENARIOS))
    cluster = own_cluster(lambda m: print(f"[localcluster] {m}", file=sys.stderr, flush=True))
    outcomes = []
    usage: dict[str, object] = {}
    try:
        workdir = args.logs or cluster.workdir / "chaos"
        for name in chosen:
            began = time.monotonic()
            outcome = SCENARIOS[name](cluster, workdir, size)
            outcomes.append(outcome)
            print(
                f"{name}: {outcome.runs} runs, {len(outcome.report.violations)} violations, "
                f"{time.monotonic() - began:.0f}s",
                flush=True,
            )
            for v in outcome.report.violations[:5]:
                print(f"  {v}", flush=True)
        if args.soak:
            workloads, types, minutes = args.soak
            shape = Soak(
                int(workloads),
                int(types),
                minutes,
                every=args.soak_every,
                pods=args.soak_pods,
                kept=args.soak_kept,
            )
            outcome, usage = soak(cluster, workdir, shape)
            outcomes.append(outcome)
            print(json.dumps(usage, indent=1), flush=True)
    finally:
        cluster.stop()
    print(table(outcomes))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    rows = {"size": size.__dict__, "scenarios": [o.row() for o in outcomes], "soak": usage}
    RESULTS.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any(o.report.violations for o in outcomes) else 0
