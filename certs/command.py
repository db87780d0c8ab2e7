"""`zeroscaler certs`: issue or rotate the webhook certificate; patch the caBundle."""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from zeroscaler.api import Kube, KubeError, NotFound
from zeroscaler.api.credentials import load_access
from zeroscaler.certs.rotation import (
    CA_CERT,
    TLS_CERT,
    TLS_KEY,
    Material,
    decode_secret_data,
    encode_secret_data,
    plan_certificates,
    stamps_for,
)
from zeroscaler.core.durations import DurationError, parse_duration
from zeroscaler.runtime.clock import Clock, LoopClock

SECRET_TYPE = "kubernetes.io/tls"
WEBHOOK_CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
BUNDLE_CURRENT = "caBundle current"


def add_certs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `zeroscaler certs`."""
    parser = sub.add_parser("certs", help="issue or rotate the webhook certificate")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, ~/.kube)")
    parser.add_argument("-n", "--namespace", default="zeroscaler", help="namespace of the Secret")
    parser.add_argument("--secret", default="zeroscaler-webhook-tls", help="TLS Secret name")
    parser.add_argument("--service", default="zeroscaler-webhook", help="webhook Service name")
    parser.add_argument(
        "--webhook-configuration",
        default="zeroscaler",
        help="MutatingWebhookConfiguration whose caBundle to set ('' to skip)",
    )
    parser.add_argument(
        "--host", action="append", default=[], help="extra DNS name or IP for the certificate"
    )
    parser.add_argument(
        "--renew-before", default="720h", help="rotate when this close to expiry (default 720h)"
    )
    parser.add_argument("--rotate", action="store_true", help="issue a new serving certificate")
    parser.add_argument("--rotate-ca", action="store_true", help="issue a new CA (old one kept)")
    parser.add_argument("--write-dir", type=Path, help="also write ca.crt, tls.crt, tls.key here")
    parser.set_defaults(func=cmd_certs)


def cmd_certs(args: argparse.Namespace) -> int:
    """Run `zeroscaler certs`."""
    try:
        renew = timedelta(seconds=parse_duration(args.renew_before))
    except DurationError as e:
        print(f"zeroscaler certs: --renew-before: {e}", file=sys.stderr)
        return 2
    hosts = [
        *args.host,
        args.service,
        f"{args.service}.{args.namespace}.svc",
        f"{args.service}.{args.namespace}.svc.cluster.local",
    ]
    try:
        message = asyncio.run(_run(args, list(dict.fromkeys(hosts)), renew, LoopClock()))
    except KubeError as e:
        print(f"zeroscaler certs: {e}", file=sys.stderr)
        return 1
    print(message)
    return 0


async def _run(args: argparse.Namespace, hosts: list[str], renew: timedelta, clock: Clock) -> str:
    async with Kube(load_access(args.kubeconfig)) as kube:
        path = f"/api/v1/namespaces/{args.namespace}/secrets"
        try:
            secret: dict[str, Any] | None = await kube.get(f"{path}/{args.secret}")
        except NotFound:
            secret = None
        existing = decode_secret_data((secret or {}).get("data") or {})
        material, why = plan_certificates(
            existing,
            hosts,
            renew_before=renew,
            rotate_ca=args.rotate_ca,
            rotate_serving=args.rotate,
            now=clock.now(),
        )
        said = [f"secret {args.namespace}/{args.secret}: {why or 'current, unchanged'}"]
        if why is not None:
            data = encode_secret_data(material.secret_data())
            stamps = stamps_for(why, clock.now())
            if secret is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": args.secret,
                        "namespace": args.namespace,
                        "annotations": stamps,
                    },
                    "type": SECRET_TYPE,
                    "data": data,
                }
                await kube.create(path, body)
            else:
                rv = secret["metadata"]["resourceVersion"]
                patch = {"metadata": {"resourceVersion": rv, "annotations": stamps}, "data": data}
                await kube.patch(f"{path}/{args.secret}", patch)
        if args.webhook_configuration:
            said.append(await patch_bundle(kube, args.webhook_configuration, material.bundle))
    if args.write_dir:
        _write(args.write_dir, material)
        said.append(f"wrote {CA_CERT}, {TLS_CERT}, {TLS_KEY}")
    return "\n".join(said)


async def patch_bundle(kube: Kube, name: str, bundle: bytes) -> str:
    """Set every webhook's caBundle, guarded by the object's resourceVersion."""
    try:
        config = await kube.get(f"{WEBHOOK_CONFIGS}/{name}")
    except NotFound:
        return f"mutatingwebhookconfiguration {name}: not found, caBundle not set"
    wanted = base64.b64encode(bundle).decode()
    ops: list[dict[str, Any]] = [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": config["metadata"]["resourceVersion"],
        }
    ]
    for i, hook in enumerate(config.get("webhooks") or []):
        client = hook.get("clientConfig") or {}
        if client.get("caBundle") != wanted:
            ops.append(
                {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": wanted}
            )
    if len(ops) == 1:
        return f"mutatingwebhookconfiguration {name}: {BUNDLE_CURRENT}"
    await kube.patch(f"{WEBHOOK_CONFIGS}/{name}", ops, "json")
    return f"mutatingwebhookconfiguration {name}: caBundle set on {len(ops) - 1} webhook(s)"


def _write(directory: Path, material: Material) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / TLS_KEY
    key.touch(mode=0o600, exist_ok=True)
    # Key first, certificate last: a reloading server sees a matching pair once the cert lands.
    key.write_bytes(material.serving.key_pem)
    (directory / CA_CERT).write_bytes(material.bundle)
    (directory / TLS_CERT).write_bytes(material.serving.cert_pem)
