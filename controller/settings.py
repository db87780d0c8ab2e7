"""Controller configuration: command-line flags over `ZEROSCALER_*` environment variables."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Sequence
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LogLevel = Literal["debug", "info", "warning", "error"]


def _default_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    """Everything the controller can be told."""

    model_config = SettingsConfigDict(env_prefix="ZEROSCALER_", frozen=True)

    kubeconfig: str | None = None
    dry_run: bool = False
    metrics_host: str = "0.0.0.0"
    metrics_port: int = Field(default=8080, ge=0, le=65535)  # 0: no HTTP endpoints
    lease_namespace: str = "zeroscaler"
    lease_name: str = "zeroscaler-controller"
    id: str = Field(default_factory=_default_id)
    lease_duration: float = Field(default=15.0, gt=0)
    discovery_interval: float = Field(default=30.0, gt=0)
    access_review_ttl: float = Field(default=60.0, ge=0)
    workers: int = Field(default=64, ge=1)  # coroutines; requests queue for 16 connections
    max_connections: int = Field(default=1024, ge=8)  # for watches: one each
    request_connections: int = Field(default=16, ge=1, le=16)  # all kept alive
    log_level: LogLevel = "info"


def parse_settings(argv: Sequence[str] | None = None) -> Settings:
    """Settings from the command line, falling back to the environment and defaults."""
    parser = argparse.ArgumentParser(
        prog="zeroscaler-controller",
        description="Scale idle operators to zero and wake them on the first change.",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        default=None,
        help="log and emit Events for what would be done; change nothing",
    )
    parser.add_argument("--metrics-host", help="address for /metrics, /healthz, /readyz")
    parser.add_argument("--metrics-port", type=int, help="port for /metrics etc. (0: none)")
    parser.add_argument("--lease-namespace", help="namespace of the leader-election Lease")
    parser.add_argument("--lease-name", help="name of the leader-election Lease")
    parser.add_argument("--id", help="this replica's identity in the Lease")
    parser.add_argument("--lease-duration", type=float, help="seconds a leader holds the Lease")
    parser.add_argument(
        "--discovery-interval", type=float, help="seconds between API discovery refreshes"
    )
    parser.add_argument(
        "--access-review-ttl", type=float, help="seconds a SubjectAccessReview answer is kept"
    )
    parser.add_argument("--workers", type=int, help="concurrent reconciles")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    given = {k: v for k, v in vars(args).items() if v is not None}
    return Settings(**given)
