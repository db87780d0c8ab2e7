"""What both components' /metrics carry: the build, and in combined mode one scrape for both."""

from __future__ import annotations

from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from zeroscaler.runtime.collectors import Forwarded, register_process_collectors


def families(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = generate_latest(registry).decode()
    return {
        f.name: [(s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


def test_build_info_names_the_installed_version() -> None:
    registry = CollectorRegistry()
    register_process_collectors(registry)
    [(labels, value)] = families(registry)["zeroscaler_build_info"]
    assert value == 1
    assert labels["version"] == metadata.version("kube-zeroscaler")
    assert labels["python"].count(".") == 2


def test_combined_mode_forwards_the_webhooks_series_once_without_its_process_series() -> None:
    controller, webhook = CollectorRegistry(), CollectorRegistry()
    register_process_collectors(controller)
    register_process_collectors(webhook)
    reviews = Counter("zeroscaler_webhook_reviews", "reviews", ["outcome"], registry=webhook)
    reviews.labels("patched").inc(3)
    controller.register(Forwarded(webhook))

    found = families(controller)
    assert ({"outcome": "patched"}, 3.0) in found["zeroscaler_webhook_reviews"]
    # generate_latest would print a family twice if both registries' process collectors came
    # through; the parser then keeps one, so count the lines instead.
    text = generate_latest(controller).decode()
    assert text.count("# TYPE zeroscaler_build_info ") == 1
    assert text.count("# TYPE process_resident_memory_bytes ") == 1
    assert text.count("# TYPE zeroscaler_webhook_reviews_total ") == 1
