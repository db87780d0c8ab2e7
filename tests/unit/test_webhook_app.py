"""The webhook app in-process: response shape, readiness, metrics, policy keeping, fuzzing."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_settings import CliApp

from testkit.discovery import builtin_resources, crd_resource
from zeroscaler.certs.issue import new_ca, new_serving_cert
from zeroscaler.cluster.policy_watch import PolicyKeeper
from zeroscaler.core.inference import Binding, RBACSnapshot
from zeroscaler.core.kinds import Discovery
from zeroscaler.webhook.app import INTERNAL_ERROR, create_app
from zeroscaler.webhook.settings import WebhookSettings
from zeroscaler.webhook.state import StaticSource, View
from zeroscaler.webhook.tls import CertReloader, server_context

NS = "team"
RBAC = RBACSnapshot.from_objects(
    [
        {
            "kind": "ClusterRole",
            "metadata": {"name": "op"},
            "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["watch"]}],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "op"},
            "roleRef": {"kind": "ClusterRole", "name": "op"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NS}],
        },
    ]
)
VIEW = View(
    rbac=RBAC,
    discovery=Discovery([*builtin_resources(), crd_resource("example.com", "Widget", "widgets")]),
    custom_resources=frozenset({"widgets.example.com"}),
)
SETTINGS = WebhookSettings(
    max_body_bytes=200_000, gc_freeze=False
)  # the test process is not a server


def make_client(ready: bool = True) -> TestClient:
    source = StaticSource(VIEW, {NS: {"zeroscaler.io/enabled": "true"}}, ready=ready)
    return TestClient(create_app(SETTINGS, source))


@pytest.fixture
def client() -> Iterator[TestClient]:
    with make_client() as c:
        yield c


def review(obj: Any = None, **request: Any) -> dict[str, Any]:
    if obj is None:
        obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "w", "namespace": NS},
            "spec": {"template": {"spec": {"containers": []}}},
        }
    req = {
        "uid": "0b0e-1",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "namespace": NS,
        "operation": "CREATE",
        "object": obj,
        **request,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def check_valid(body: dict[str, Any], uid: str) -> dict[str, Any]:
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == uid
    assert response["allowed"] is True
    assert ("patch" in response) == ("patchType" in response)
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(response["patch"]))
        assert isinstance(ops, list)
        assert ops
    assert all(isinstance(w, str) for w in response.get("warnings", []))
    result: dict[str, Any] = response
    return result


def test_mutate_returns_a_patch_that_applies(client: TestClient) -> None:
    body = review()
    resp = client.post("/mutate", json=body)
    assert resp.status_code == 200
    response = check_valid(resp.json(), "0b0e-1")
    ops = json.loads(base64.b64decode(response["patch"]))
    patched = jsonpatch.JsonPatch(ops).apply(body["request"]["object"])
    assert patched["metadata"]["annotations"] == {
        "zeroscaler.io/idle-timeout": "15m",
        "zeroscaler.io/max-sleep": "10h",
        "zeroscaler.io/watched-kinds": "Widget.example.com",
        "zeroscaler.io/watch-namespaces": "*",
        "zeroscaler.io/injected": (
            "zeroscaler.io/idle-timeout,zeroscaler.io/max-sleep,zeroscaler.io/watch-namespaces,"
            "zeroscaler.io/watched-kinds"
        ),
    }
    again = client.post("/mutate", json=review(patched, operation="UPDATE")).json()
    assert "patch" not in check_valid(again, "0b0e-1")


def test_unopted_namespace_and_unknown_namespace(client: TestClient) -> None:
    body = review(namespace="elsewhere")
    response = check_valid(client.post("/mutate", json=body).json(), "0b0e-1")
    assert "patch" in response  # not in the cache: the API server's namespaceSelector is trusted


@pytest.mark.parametrize(
    ("flags", "namespace", "patched"),
    [
        ([], "kube-system", False),
        (["--namespace", "zs-system"], "zs-system", False),
        (["--exclude-namespaces", "ops,kube-system"], "ops", False),
        (["--exclude-namespaces", "ops"], "zeroscaler", False),  # its own namespace stays out
        (["--exclude-namespaces", "ops"], "kube-system", True),
    ],
)
def test_excluded_namespaces_are_never_patched_even_when_opted_in(
    flags: list[str], namespace: str, patched: bool
) -> None:
    settings = CliApp.run(WebhookSettings, cli_args=[*flags, "--gc-freeze", "false"])
    opted = {namespace: {"zeroscaler.io/enabled": "true"}}
    with TestClient(create_app(settings, StaticSource(VIEW, opted))) as c:
        answer = c.post("/mutate", json=review(namespace=namespace)).json()
    assert ("patch" in check_valid(answer, "0b0e-1")) == patched


def test_warnings_are_passed_on(client: TestClient) -> None:
    obj = review()["request"]["object"]
    obj["metadata"]["annotations"] = {"zeroscaler.io/idle-timeout": "soon"}
    response = check_valid(client.post("/mutate", json=review(obj)).json(), "0b0e-1")
    assert any(
        w.startswith("zeroscaler.io/idle-timeout: 'soon' is not a duration")
        for w in response["warnings"]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{", "body is not JSON"),
        (b"[]", "body is not a JSON object"),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}
            ).encode(),
            "apiVersion",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "request is missing",
        ),
        (
            json.dumps({**review(), "request": {"uid": 5}}).encode(),
            "request.uid is missing or not a string",
        ),
        (json.dumps(review(obj=[1])).encode(), "request.object is not an object or null"),
        (json.dumps(review(namespace=3)).encode(), "request.namespace is not a string"),
        (json.dumps(review(dryRun="yes")).encode(), "request.dryRun is not a boolean"),
        (b"\xff\xfe", "body is not JSON"),
        (b" " * 200_001, "body is over 200000 bytes"),
        (b"[" * 100_000, "body is not JSON"),
    ],
)
def test_malformed_reviews_get_400(client: TestClient, content: bytes, message: str) -> None:
    resp = client.post("/mutate", content=content, headers={"Content-Type": "application/json"})
    assert resp.status_code == 400
    assert message in resp.json()["message"]


def test_lone_surrogates_are_echoed_not_crashed_on(client: TestClient) -> None:
    body = review(uid="\ud800")
    body["request"]["object"]["metadata"]["annotations"] = {"zeroscaler.io/watched-kinds": "\udfff"}
    resp = client.post(
        "/mutate", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 200
    response = check_valid(resp.json(), "\ud800")
    assert any("is not a kind reference" in w for w in response["warnings"])


class BrokenRBAC(RBACSnapshot):
    def bindings_for(self, namespace: str, service_account: str) -> list[Binding]:
        raise RuntimeError("a bug")


def test_a_bug_admits_unchanged_with_a_warning() -> None:
    view = View(rbac=BrokenRBAC(), discovery=VIEW.discovery)
    source = StaticSource(view, {NS: {"zeroscaler.io/enabled": "true"}})
    with TestClient(create_app(SETTINGS, source)) as c:
        resp = c.post("/mutate", json=review())
        assert resp.status_code == 200
        response = check_valid(resp.json(), "0b0e-1")
        assert "patch" not in response
        assert response["warnings"] == [INTERNAL_ERROR]
        assert 'zeroscaler_webhook_reviews_total{outcome="error"} 1.0' in c.get("/metrics").text


def test_health_readiness_and_metrics() -> None:
    with make_client(ready=False) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 503
        cold = check_valid(c.post("/mutate", json=review()).json(), "0b0e-1")
        assert "patch" not in cold
        assert cold["warnings"] == [
            "zeroscaler webhook is starting (caches not synced): no annotations added"
        ]
    with make_client() as c:
        assert c.get("/readyz").status_code == 200
        c.post("/mutate", json=review())
        c.post("/mutate", content=b"x")
        text = c.get("/metrics").text
        assert 'zeroscaler_webhook_reviews_total{outcome="patched"} 1.0' in text
        assert 'zeroscaler_webhook_reviews_total{outcome="rejected"} 1.0' in text
        assert "zeroscaler_webhook_review_duration_seconds_bucket" in text


# Fuzzing: any body yields 200 with a valid review, or 400; never 500.
# Any code point, lone surrogates and control characters included.
TEXT = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(["\ud800", "\udfff", "\x00", "\u202e"]),
    max_size=20,
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
FIELDS = [
    "uid",
    "kind",
    "resource",
    "namespace",
    "operation",
    "object",
    "oldObject",
    "dryRun",
    "subResource",
]


@st.composite
def hostile_reviews(draw: st.DrawFn) -> Any:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(JSON)
    body = review()
    req = body["request"]
    for key in draw(st.lists(st.sampled_from(FIELDS), max_size=4)):
        if draw(st.booleans()):
            req.pop(key, None)
        else:
            req[key] = draw(JSON)
    obj = req.get("object")
    if choice >= 2 and isinstance(obj, dict):
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta["annotations"] = draw(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "zeroscaler.io/idle-timeout",
                            "zeroscaler.io/watched-kinds",
                            "zeroscaler.io/enabled",
                            "zeroscaler.io/injected",
                            "controller-zero-scaler/watchedKinds",
                            "x",
                        ]
                    ),
                    TEXT | st.just("1h" * 20_000) | JSON,
                )
            )
            meta["labels"] = draw(st.dictionaries(TEXT, TEXT) | JSON)
    if choice == 3 and isinstance(obj, dict):
        obj["spec"] = draw(JSON)
    return body


@pytest.fixture(scope="module")
def shared_client() -> Iterator[TestClient]:
    with make_client() as c:
        yield c


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=hostile_reviews())
def test_fuzz_mutate_never_500(shared_client: TestClient, body: Any) -> None:
    resp = shared_client.post(
        "/mutate", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert resp.status_code in (200, 400), resp.text
    if resp.status_code == 200:
        response = check_valid(resp.json(), body["request"]["uid"])
        assert INTERNAL_ERROR not in response.get("warnings", [])  # no bug hidden by the guard
    else:
        assert resp.json()["message"].startswith("malformed AdmissionReview: ")


def configmap(name: str, text: str | None) -> dict[str, Any]:
    data = {"policy.yaml": text} if text is not None else {}
    return {
        "metadata": {"name": name, "namespace": "zeroscaler", "uid": f"uid-{name}"},
        "data": data,
    }


def test_policy_keeper_keeps_the_last_valid_policy() -> None:
    keeper = PolicyKeeper()
    assert keeper.update(configmap("a", "defaults: {idleTimeout: 5m}")) is None
    assert keeper.policy.idle_timeout == 300
    rejection = keeper.update(configmap("a", "defaults: {idleTimeout: often}"))
    assert rejection is not None
    assert rejection.name == "a"
    assert rejection.uid == "uid-a"
    assert "keeping the last valid one (zeroscaler/a)" in rejection.message
    assert "defaults.idleTimeout: 'often' is not a duration" in rejection.message
    assert keeper.policy.idle_timeout == 300
    assert keeper.update(configmap("b", None)) is not None  # no policy.yaml key
    assert keeper.update(configmap("b", "defaults: {idleTimeout: 7m}")) is None
    assert keeper.policy.idle_timeout == 420  # b sorts after a
    assert keeper.remove(configmap("b", None)) is None
    assert keeper.policy.idle_timeout == 300
    assert keeper.remove(configmap("never-seen", None)) is None


def test_policy_keeper_rejects_conflicts_between_configmaps() -> None:
    keeper = PolicyKeeper()
    assert keeper.update(configmap("a", "rules: [{name: r}]")) is None
    rejection = keeper.update(configmap("b", "rules: [{name: r}]"))
    assert rejection is not None
    assert "name 'r' is already used in zeroscaler/a" in rejection.message
    assert keeper.sources == ("zeroscaler/a",)


def test_the_reloader_loads_a_changed_pair_only_once_key_and_certificate_match(
    tmp_path: Path,
) -> None:
    ca = new_ca()
    cert, key = new_serving_cert(ca, ["127.0.0.1"]).write(tmp_path, "tls")
    ctx = server_context(str(cert), str(key))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    reloader = CertReloader(ctx, str(cert), str(key))
    assert reloader.check() is False  # unchanged
    other = new_serving_cert(ca, ["127.0.0.1"])
    cert.write_bytes(other.cert_pem)  # key not yet written: a mismatched pair is not loaded
    assert reloader.check() is False
    key.write_bytes(other.key_pem)
    assert reloader.check() is True
    assert reloader.reloads == 1


def test_a_port_flag_wins_over_the_service_link_variable_kubernetes_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A Service named zeroscaler-webhook puts this in every pod of its namespace.
    monkeypatch.setenv("ZEROSCALER_WEBHOOK_PORT", "tcp://10.96.0.9:443")
    assert CliApp.run(WebhookSettings, cli_args=["--port", "9443"]).port == 9443


def test_combined_arguments_split_at_the_first_double_dash() -> None:
    from zeroscaler.cli.combined_main import split_arguments

    assert split_arguments(["--id", "a", "--", "--port", "1", "--", "x"]) == (
        ["--id", "a"],
        ["--port", "1", "--", "x"],
    )
    assert split_arguments(["--id", "a"]) == (["--id", "a"], [])


def _lease_review(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-probe",
            "operation": "CREATE",
            "namespace": "zeroscaler",
            "object": {"metadata": {"generateName": "probe-", "labels": labels}},
        },
    }


def test_the_activator_probe_is_answered_with_its_token(client: TestClient) -> None:
    review = _lease_review({"zeroscaler.io/activator-probe": "abc123"})
    answer = client.post("/activate/probe", json=review).json()["response"]
    assert answer == {
        "uid": "u-probe",
        "allowed": True,
        "warnings": ["zeroscaler activator probe abc123"],
    }
    assert 'zeroscaler_activator_requests_total{outcome="probe"} 1.0' in client.get("/metrics").text


def test_an_activation_never_refuses_even_when_it_cannot_wake(client: TestClient) -> None:
    # No cluster behind this app, so no activator configuration: every path is unknown, answered
    # at once and allowed (failurePolicy Ignore would admit it too), so that the backend's own
    # webhook decides.
    review = _lease_review({})
    answer = client.post("/activate/9/deployment/ops/op/op-webhook", json=review).json()
    assert answer["response"] == {"uid": "u-probe", "allowed": True}
    assert client.post("/activate/9/deployment/ops/op/op-webhook", content=b"{").status_code == 400
    metrics = client.get("/metrics").text
    assert 'zeroscaler_activator_requests_total{outcome="unknown"} 1.0' in metrics
    assert 'zeroscaler_activator_requests_total{outcome="rejected"} 1.0' in metrics


ACTIVATE_PATHS = st.sampled_from(
    ["/activate/probe", "/activate/9/deployment/ops/op/op-webhook", "/activate/x", "/activate/"]
) | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60).map(
    lambda tail: "/activate/" + tail.replace("?", "").replace("#", "")
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=hostile_reviews(), path=ACTIVATE_PATHS)
def test_fuzz_activate_never_500(shared_client: TestClient, body: Any, path: str) -> None:
    resp = shared_client.post(
        path, content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert resp.status_code in (200, 400, 404, 405), resp.text
    if resp.status_code == 200:
        check_valid(resp.json(), body["request"]["uid"])
    elif resp.status_code == 400:
        assert resp.json()["message"].startswith("malformed AdmissionReview: ")


@pytest.mark.parametrize("path", ["/", "/mutate/guessed"])
def test_a_review_at_a_path_the_configuration_does_not_hold_gets_a_404(
    client: TestClient, path: str
) -> None:
    # Hostile: a caller who is not the API server learns nothing of what RBAC grants.
    resp = client.post(path, json=review())
    assert resp.status_code in (404, 405)
    assert "patch" not in resp.text
    metrics = client.get("/metrics").text
    if resp.status_code == 404:
        assert 'zeroscaler_webhook_reviews_total{outcome="not-found"} 1.0' in metrics
