"""The chart's NetworkPolicies: each component's port admitted alone, egress rules when given.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import json

from tests.chart.conftest import RELEASE, Helm
from tests.chart.rendered import (
    container,
    deployment,
    only,
    render,
)


def test_network_policies_admit_only_each_component_port(helm: Helm) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    objs = render(
        helm,
        "--set", "networkPolicy.enabled=true",
        "--set-json", f"networkPolicy.controller.from=[{json.dumps(peer)}]",
    )  # fmt: skip
    for component, port in (("controller", 8080), ("webhook", 10250)):
        policy = only(objs, "NetworkPolicy", f"{RELEASE}-zeroscaler-{component}")
        pod_labels = deployment(objs, component)["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        [rule] = policy["spec"]["ingress"]
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}]
        ports = [p["containerPort"] for p in container(deployment(objs, component))["ports"]]
        assert port in ports
        assert rule.get("from") == ([peer] if component == "controller" else None)


def test_network_policy_egress_rules_are_used_when_given(helm: Helm) -> None:
    egress = [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 6443}]}]
    objs = render(
        helm,
        "--set", "networkPolicy.enabled=true",
        "--set-json", f"networkPolicy.egress={json.dumps(egress)}",
    )  # fmt: skip
    for component in ("controller", "webhook"):
        policy = only(objs, "NetworkPolicy", f"{RELEASE}-zeroscaler-{component}")
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert policy["spec"]["egress"] == egress
