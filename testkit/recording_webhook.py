"""A minimal mutating webhook on loopback over TLS: records each review and adds one annotation."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from zeroscaler.certs.issue import new_ca, new_serving_cert


@dataclass
class RecordingWebhook:
    """What the API server sent to the webhook's URL."""

    port: int
    ca_pem: bytes
    calls: list[tuple[str, str, str, str]] = field(default_factory=list)  # kind, ns, name, op

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"

    def saw(self, kind: str, namespace: str, name: str) -> list[str]:
        """The operations reviewed for one object."""
        return [op for k, n, m, op in list(self.calls) if (k, n, m) == (kind, namespace, name)]


def _handler(rec: RecordingWebhook, key: str, value: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            rec.calls.append(
                (request["kind"]["kind"], request["namespace"], request["name"] or "",
                 request["operation"])
            )  # fmt: skip
            annotations = (request["object"].get("metadata") or {}).get("annotations")
            patch: list[dict[str, Any]] = (
                [] if annotations else [{"op": "add", "path": "/metadata/annotations", "value": {}}]
            )
            path = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
            patch.append({"op": "add", "path": path, "value": value})
            response = {
                "uid": request["uid"],
                "allowed": True,
                "patchType": "JSONPatch",
                "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
            }
            body = json.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "response": response}
            ).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    return Handler


@contextmanager
def recording_webhook(workdir: Path, key: str, value: str) -> Iterator[RecordingWebhook]:
    """Serve on a free 127.0.0.1 port with a certificate of a fresh CA (`ca_pem`)."""
    ca = new_ca("test-webhook-ca")
    cert, tls_key = new_serving_cert(ca, ["127.0.0.1"]).write(workdir, "serving")
    rec = RecordingWebhook(port=0, ca_pem=ca.cert_pem)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec, key, value))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, tls_key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    rec.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
