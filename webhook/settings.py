"""Webhook configuration from the command line and `ZEROSCALER_WEBHOOK_*` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
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
        default=8 * 1024 * 1024, gt=0, description="largest review accepted"
    )
    log_level: str = Field(default="info", description="debug, info, warning or error")
    gc_freeze: bool = Field(
        default=True,
        description="once caches are loaded, keep long-lived objects out of garbage collection",
    )
