"""The benchmarks' admission webhooks: the webhook benchmark's servers as processes, and
mutating webhook configurations with a webhook that changes nothing."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def start_webhook(kind: str, port: int, cert: str, key: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "bench.bench_webhook", "--serve", kind, "--port", str(port),
           "--cert", cert, "--key", key]  # fmt: skip
    return subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1])


def wait_up(url: str, ca: str, proc: subprocess.Popen[bytes], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    ctx = ssl.create_default_context(cafile=ca)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            httpx.get(url, verify=ctx, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"server at {url} not up after {limit:.0f}s")


def webhook_configuration(name: str, webhooks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }


def noop_webhook(url: str, ca: bytes, namespaces: list[str]) -> dict[str, Any]:
    return {
        "name": "noop.bench.zeroscaler.io",
        "clientConfig": {"url": url, "caBundle": base64.b64encode(ca).decode()},
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["configmaps"],
                "scope": "Namespaced",
            }
        ],
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
            ]
        },
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
