"""Every sample name the controller and the webhook expose on /metrics, with its label names,
read from what their real registries write in process (so a renamed metric or label is seen at
once), and the label names of labelled counters that have no sample yet."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from zeroscaler.certs.renewer import Renewer, RenewerConfig
from zeroscaler.certs.schedule import RenewalPolicy
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.workload import EPOCH, Workload
from zeroscaler.controller.workload_object import trim_workload
from zeroscaler.runtime.clock import LoopClock
from zeroscaler.runtime.collectors import APIErrors, APIThrottled
from zeroscaler.webhook.app import create_app
from zeroscaler.webhook.settings import WebhookSettings
from zeroscaler.webhook.state import StaticSource

# The samples each type of family has, by suffix, and the labels a suffix adds.
SUFFIXES: dict[str, dict[str, tuple[str, ...]]] = {
    "counter": {"_total": ()},
    "gauge": {"": ()},
    "histogram": {"_bucket": ("le",), "_sum": (), "_count": ()},
    "summary": {"_sum": (), "_count": ()},  # no quantiles: none of ours has any
    "info": {"_info": ()},
    "unknown": {"": ()},
}


def expositions() -> list[tuple[str, CollectorRegistry]]:
    """What /metrics answers, with the registry behind it: the controller's (leading, one managed
    workload with series of its own), the webhook's, and the certificate renewer's."""
    obj = trim_workload({"metadata": {"name": "op"}, "spec": {"replicas": 0}})
    managed = Workload(("Deployment", "ops", "op"), obj, EPOCH)
    managed.managed = True
    controller = Metrics(lambda: True, workloads=lambda: [managed])
    controller.woke(managed.report, managed.managed, "activity", 0.1)
    controller.slept(managed.report, managed.managed, "idle")
    webhook = CollectorRegistry()
    create_app(WebhookSettings(gc_freeze=False), StaticSource(), webhook)
    renewal = CollectorRegistry()
    day = timedelta(days=1)
    config = RenewerConfig(
        "ns", "tls", "", Path("c"), Path("k"), RenewalPolicy(0.5, day), day, day, 1
    )
    Renewer(None, config, LoopClock(), renewal)  # type: ignore[arg-type]  # metrics only
    return [
        (controller.render().decode(), controller.registry),
        (generate_latest(webhook).decode(), webhook),
        (generate_latest(renewal).decode(), renewal),
    ]


def exposed() -> dict[str, frozenset[str]]:
    """Sample name -> its label names, over every component's /metrics."""
    found: dict[str, set[str]] = {}
    for text, registry in expositions():
        declared = _declared_labels(registry)
        for family in text_string_to_metric_families(text):
            base = set(declared.get(family.name, ()))
            for sample in family.samples:
                base |= set(sample.labels) - {"le", "quantile"}
            for suffix, extra in SUFFIXES.get(family.type, {"": ()}).items():
                found.setdefault(family.name + suffix, set()).update(base, extra)
    return {name: frozenset(labels) for name, labels in found.items()}


def _declared_labels(registry: CollectorRegistry) -> dict[str, tuple[str, ...]]:
    """Label names of the registry's prometheus_client metrics, also those with no sample yet."""
    labels: dict[str, tuple[str, ...]] = {}
    for collector in list(registry._collector_to_names):
        if isinstance(collector, MetricWrapperBase):
            labels[collector._name] = tuple(collector._labelnames)
        elif isinstance(collector, APIErrors):
            labels[collector.name] = APIErrors.LABELS
        elif isinstance(collector, APIThrottled):
            labels[collector.name] = ()
    return labels
