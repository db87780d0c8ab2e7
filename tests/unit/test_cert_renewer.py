"""The running renewer decides by the clock it is given: the same Secret is kept at one time and
its serving certificate renewed at another, the new one starting at that clock's time."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509

from tests.unit.mock_api import kube_served_by
from zeroscaler.certs.issue import backdate_for, new_ca, new_serving_cert
from zeroscaler.certs.renewer import Renewer, RenewerConfig
from zeroscaler.certs.rotation import (
    CA_CERT,
    CA_KEY,
    TLS_CERT,
    TLS_KEY,
    decode_secret_data,
    encode_secret_data,
)
from zeroscaler.certs.schedule import RenewalPolicy
from zeroscaler.runtime.clock import ManualClock

T0 = datetime(2020, 1, 1, tzinfo=UTC)  # when the pair was issued (long before any real now)
DAY = timedelta(days=1)
SECRET = "/api/v1/namespaces/zs/secrets/zs-tls"
CA = new_ca(now=T0, lifetime=100 * DAY)
SERVING = new_serving_cert(CA, ["zs.zs.svc"], now=T0, lifetime=10 * DAY)  # due halfway


class Server:
    """The TLS Secret, and every PUT of it."""

    def __init__(self) -> None:
        data = {CA_CERT: CA.cert_pem, CA_KEY: CA.key_pem}
        data |= {TLS_CERT: SERVING.cert_pem, TLS_KEY: SERVING.key_pem}
        self.secret: dict[str, Any] = {
            "metadata": {"name": "zs-tls", "namespace": "zs", "resourceVersion": "1"},
            "data": encode_secret_data(data),
        }
        self.puts: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == SECRET
        if request.method == "PUT":
            self.puts.append(json.loads(request.content))
            self.secret = self.puts[-1]
        return httpx.Response(200, json=self.secret)


def _sync(clock: ManualClock, tmp_path: Path) -> tuple[datetime, Server]:
    server = Server()
    config = RenewerConfig(
        namespace="zs",
        secret="zs-tls",
        webhook_configuration="",
        cert_file=tmp_path / "tls.crt",
        key_file=tmp_path / "tls.key",
        policy=RenewalPolicy(renew_fraction=0.5, settle=timedelta(minutes=1)),
        serving_lifetime=10 * DAY,
        ca_lifetime=100 * DAY,
        interval=60.0,
    )

    async def scenario() -> datetime:
        async with kube_served_by(server) as kube:
            return await Renewer(kube, config, clock).sync()

    return asyncio.run(scenario()), server


def test_a_current_pair_is_kept_until_the_given_clock_reaches_its_renewal_point(
    tmp_path: Path,
) -> None:
    recheck, server = _sync(ManualClock(T0 + DAY), tmp_path)
    assert server.puts == []
    assert recheck == SERVING.cert.not_valid_before_utc + 5 * DAY


def test_a_pair_past_its_renewal_point_by_the_given_clock_is_renewed_from_that_time(
    tmp_path: Path,
) -> None:
    now = T0 + 6 * DAY
    recheck, server = _sync(ManualClock(now), tmp_path)
    assert recheck == now
    [written] = server.puts
    renewed = x509.load_pem_x509_certificate(decode_secret_data(written["data"])[TLS_CERT])
    assert renewed.not_valid_before_utc == now - backdate_for(10 * DAY)
    assert written["metadata"]["annotations"] == {
        "zeroscaler.io/serving-since": "2020-01-07T00:00:00.000Z"
    }
