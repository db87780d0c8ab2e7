"""Webhook configuration from the command line and `ZEROSCALER_WEBHOOK_*` environment variables."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from zeroscaler.core.durations import DurationError, parse_duration
from zeroscaler.webhook.intake import REVIEW_LIMIT


class WebhookSettings(BaseSettings):
    """How the webhook runs."""

    model_config = SettingsConfigDict(
        env_prefix="ZEROSCALER_WEBHOOK_",
        cli_kebab_case=True,
        cli_prog_name="zeroscaler-webhook",
        frozen=True,
    )

    kubeconfig: str = Field(default="", description="kubeconfig file; in-cluster config if unset")
    namespace: str = Field(
        default="zeroscaler", description="namespace holding the policy ConfigMaps"
    )
    cert_file: str = Field(default="", description="PEM serving certificate (reloaded on change)")
    key_file: str = Field(default="", description="PEM private key of the serving certificate")
    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8443, ge=1, le=65535, description="port to listen on")
    discovery_interval: float = Field(
        default=30.0, gt=0, description="seconds between discovery refreshes"
    )
    cert_check_interval: float = Field(
        default=2.0, gt=0, description="seconds between certificate checks"
    )
    namespace_wait: float = Field(
        default=2.0, ge=0, description="seconds to wait for a namespace not yet in the cache"
    )
    max_body_bytes: int = Field(
        default=REVIEW_LIMIT,
        gt=0,
        description="largest review accepted (4 MiB holds an object and its old version at the "
        "API server's largest)",
    )
    body_budget_bytes: int = Field(
        default=4 * REVIEW_LIMIT,
        gt=0,
        description="bytes of request bodies held at once; more wait, then get 503",
    )
    read_timeout: float = Field(
        default=10.0, gt=0, description="seconds a request may take to send its body"
    )
    max_connections: int = Field(
        default=1000, ge=10, description="connections and requests at once; more get 503"
    )
    exclude_namespaces: list[str] = Field(
        default=["kube-system"],
        description="namespaces never mutated, whatever their labels (--namespace is always one)",
    )
    log_level: str = Field(default="info", description="debug, info, warning or error")
    log_format: Literal["text", "json"] = Field(
        default="text", description="text (logfmt) or json, one line per record on stderr"
    )
    gc_freeze: bool = Field(
        default=True,
        description="once caches are loaded, keep long-lived objects out of garbage collection",
    )
    webhook_configuration: str = Field(
        default="",
        description="its own MutatingWebhookConfiguration: reviews are answered only at a path it "
        "holds, and a Service-backed webhook without one is given a secret one; empty: /mutate",
    )
    activator_configuration: str = Field(
        default="",
        description="the activator's MutatingWebhookConfiguration: only a path it holds wakes "
        "anything; empty: every /activate request is answered at once, having done nothing",
    )
    activator_max_waiting: int = Field(
        default=200, ge=1, description="covered requests held at once; more are answered at once"
    )
    activator_requests: str = Field(
        default="zeroscaler-activator-requests",
        description="ConfigMap (in --namespace) where the activator asks the controller for wakes",
    )
    cert_secret: str = Field(
        default="",
        description="TLS Secret (in --namespace) to serve from and renew; empty: only the files",
    )
    cert_webhook_configuration: str = Field(
        default="",
        description="MutatingWebhookConfiguration whose caBundle is kept equal to the Secret's CAs",
    )
    cert_renew_fraction: float = Field(
        default=0.67, gt=0, lt=1, description="renew once this fraction of a lifetime has passed"
    )
    cert_serving_lifetime: float = Field(
        default=365 * 86400.0, gt=0, description="lifetime of a renewed serving certificate (8760h)"
    )
    cert_ca_lifetime: float = Field(
        default=3650 * 86400.0, gt=0, description="lifetime of a rotated CA (87600h)"
    )
    cert_sync_interval: float = Field(
        default=10.0, gt=0, description="seconds between reads of the TLS Secret"
    )
    cert_settle: float = Field(
        default=60.0,
        gt=0,
        description="seconds a renewal step is given to reach every API server and replica",
    )

    def tls_files_missing(self) -> str | None:
        """Why the webhook cannot serve HTTPS with these settings, or None when it can."""
        if not self.cert_file or not self.key_file:
            return "--cert-file and --key-file are required (the webhook serves HTTPS only)"
        return None

    @field_validator("cert_serving_lifetime", "cert_ca_lifetime", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return parse_duration(value)
            except DurationError as e:
                raise ValueError(f"{e}") from None
        return value

    @model_validator(mode="after")
    def _budget_fits(self) -> Self:
        if self.body_budget_bytes < self.max_body_bytes:
            raise ValueError(
                f"body_budget_bytes ({self.body_budget_bytes}) must hold at least one review of "
                f"max_body_bytes ({self.max_body_bytes})"
            )
        return self

    @model_validator(mode="after")
    def _renewal_fits(self) -> Self:
        if self.cert_settle < 2 * self.cert_sync_interval:
            raise ValueError(
                f"cert_settle ({self.cert_settle:g}s) must be at least twice cert_sync_interval "
                f"({self.cert_sync_interval:g}s): every replica must read the Secret in between"
            )
        if self.cert_ca_lifetime * (1 - self.cert_renew_fraction) <= 3 * self.cert_settle:
            raise ValueError(
                "cert_ca_lifetime after its renewal point must exceed three cert_settle times "
                "(the old CA stays trusted through the rotation's steps)"
            )
        return self
