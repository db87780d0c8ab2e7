"""Where the API server is and how to prove who we are: in-cluster config or a kubeconfig.

The common cases (ServiceAccount, bearer token, token file, client certificate, CA, insecure,
proxy, TLS server name) are read here with the standard library and PyYAML; credentials that need
a plugin (`exec`, `auth-provider`) fall back to the `kubernetes` package, imported only then:
importing it costs the long-running controller memory it would otherwise hold all day
(`bench/bench_memory.py`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import ssl
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from zeroscaler import DISTRIBUTION

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# The kubelet rotates projected tokens well before they expire; re-reading a minute late is fine.
TOKEN_REREAD_SECONDS = 60.0


class ConfigError(Exception):
    """No usable cluster configuration; the message says which file and field."""


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """How to reach and authenticate to one API server."""

    server: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM, when the kubeconfig embeds it
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None  # read again now and then: projected tokens rotate
    verify: bool = True
    proxy: str | None = None
    tls_server_name: str | None = None  # the name to ask for and verify, when not the server's
    refresh_token: Callable[[], str] | None = None  # a plugin's tokens expire: ask it again
    namespace: str = "default"  # the context's namespace, or the pod's own in-cluster

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.verify:
            return False
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        elif self.cert_data and self.key_data:
            _load_chain_from_memory(ctx, self.cert_data, self.key_data)
        return ctx

    def auth(self) -> httpx.Auth | None:
        if self.token_file:
            path = Path(self.token_file)
            return BearerAuth(path.read_text, TOKEN_REREAD_SECONDS)
        if self.refresh_token is not None:
            return BearerAuth(self.refresh_token, initial=self.token or "")
        if self.token:
            token = self.token
            return BearerAuth(lambda: token, initial=token)
        return None


def _load_chain_from_memory(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads key pairs from files: write them to a private directory for the moment.
    with tempfile.TemporaryDirectory(prefix="zeroscaler-tls-") as tmp:
        paths = []
        for name, data in (("tls.crt", cert), ("tls.key", key)):
            path = Path(tmp) / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            paths.append(str(path))
        ctx.load_cert_chain(paths[0], paths[1])


class BearerAuth(httpx.Auth):
    """A bearer token from `load`, loaded again when older than `max_age` and after a 401.

    A request refused with 401 is sent once more if loading gives a different token: the kubelet
    rotated the file, or an exec plugin's short-lived token expired.
    """

    def __init__(
        self, load: Callable[[], str], max_age: float = float("inf"), *, initial: str = ""
    ) -> None:
        # The OS's monotonic time, not a given clock: the kubelet rotates the token file by the OS.
        self._load = load
        self._max_age = max_age
        self._token = initial
        self._loaded_at = time.monotonic() if initial else float("-inf")

    def _stale(self) -> bool:
        return time.monotonic() - self._loaded_at >= self._max_age

    def _keep(self, loaded: str) -> str:
        self._token, self._loaded_at = loaded.strip(), time.monotonic()
        return self._token

    def _sync_load(self) -> str:
        try:
            loaded = self._load()
        except (OSError, ConfigError):
            if not self._token:
                raise
            return self._token  # keep the one we had; the next request tries again
        return self._keep(loaded)

    async def _async_load(self) -> str:
        return await asyncio.to_thread(self._sync_load)  # a plugin may run for a second

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._sync_load() if self._stale() else self._token
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401 and self._sync_load() != token:
            request.headers["Authorization"] = f"Bearer {self._token}"
            yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self._async_load() if self._stale() else self._token
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401 and await self._async_load() != token:
            request.headers["Authorization"] = f"Bearer {self._token}"
            yield request


def load_access(kubeconfig: str | None = None, context: str | None = None) -> ClusterAccess:
    """Access from a kubeconfig file, else in-cluster, else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig:
        return from_kubeconfig([Path(kubeconfig)], context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT_DIR / "token").exists():
        return in_cluster()
    paths = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return from_kubeconfig(paths or [Path.home() / ".kube" / "config"], context)


def in_cluster(
    environ: Mapping[str, str] = os.environ, directory: Path = SERVICE_ACCOUNT_DIR
) -> ClusterAccess:
    """The pod's ServiceAccount: token and CA from the mounted files, address from the env."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        namespace = (directory / "namespace").read_text().strip() or "default"
    except OSError:
        namespace = "default"
    return ClusterAccess(
        server=f"https://{host}:{port}",
        ca_file=str(directory / "ca.crt"),
        token_file=str(directory / "token"),
        namespace=namespace,
    )


def from_kubeconfig(paths: list[Path], context: str | None = None) -> ClusterAccess:
    """Merge kubeconfig files the way kubectl does (first one to name a thing wins) and resolve."""
    docs: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            if len(paths) == 1:
                raise ConfigError(f"kubeconfig {path} does not exist") from None
            continue
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"kubeconfig {path} cannot be read: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"kubeconfig {path} is not a mapping")
        docs.append((path, doc))
    if not docs:
        raise ConfigError(f"no kubeconfig found (looked at {', '.join(map(str, paths))})")
    name = context or next((d["current-context"] for _, d in docs if d.get("current-context")), "")
    if not name:
        raise ConfigError("kubeconfig has no current-context and none was given")
    ctx, _ = _named(docs, "contexts", "context", name)
    cluster, cluster_dir = _named(docs, "clusters", "cluster", str(ctx.get("cluster", "")))
    user: dict[str, Any] = {}
    user_dir = cluster_dir
    if ctx.get("user"):
        user, user_dir = _named(docs, "users", "user", str(ctx["user"]))
    if "username" in user or "password" in user:
        raise ConfigError(
            f"kubeconfig user {ctx.get('user')!r}: basic auth (username/password) is not "
            "supported (Kubernetes removed it); use a token or a client certificate"
        )
    namespace = str(ctx.get("namespace") or "default")
    if {"exec", "auth-provider"} & user.keys():
        plugin = _from_kubernetes_package(paths[0] if len(paths) == 1 else None, name)
        return dataclasses.replace(plugin, namespace=namespace)
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"kubeconfig cluster {ctx.get('cluster')!r} has no server")
    return ClusterAccess(
        server=server.rstrip("/"),
        ca_file=_file(cluster, "certificate-authority", cluster_dir),
        ca_data=_data(cluster, "certificate-authority-data", str),
        cert_file=_file(user, "client-certificate", user_dir),
        key_file=_file(user, "client-key", user_dir),
        cert_data=_data(user, "client-certificate-data", bytes),
        key_data=_data(user, "client-key-data", bytes),
        token=str(user["token"]) if user.get("token") else None,
        token_file=_file(user, "tokenFile", user_dir) if not user.get("token") else None,
        verify=not cluster.get("insecure-skip-tls-verify", False),
        proxy=str(cluster["proxy-url"]) if cluster.get("proxy-url") else None,
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
        namespace=namespace,
    )


def _named(
    docs: list[tuple[Path, dict[str, Any]]], section: str, field: str, name: str
) -> tuple[dict[str, Any], Path]:
    for path, doc in docs:
        for entry in doc.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                value = entry.get(field) or {}
                if not isinstance(value, dict):
                    raise ConfigError(f"kubeconfig {path}: {section} {name!r} is not a mapping")
                return value, path.parent
    raise ConfigError(f"kubeconfig has no {section[:-1]} named {name!r}")


def _file(section: Mapping[str, Any], key: str, base: Path) -> str | None:
    value = section.get(key)
    if not value:
        return None
    return str(base / Path(str(value)).expanduser())  # relative paths: to the kubeconfig's folder


def _data(section: Mapping[str, Any], key: str, kind: type[str] | type[bytes]) -> Any:
    value = section.get(key)
    if not value:
        return None
    try:
        raw = base64.b64decode(str(value), validate=True)
    except ValueError:
        raise ConfigError(f"kubeconfig field {key} is not base64") from None
    return raw.decode() if kind is str else raw


def _from_kubernetes_package(kubeconfig: Path | None, context: str) -> ClusterAccess:
    try:
        from kubernetes import client, config  # slow and large: only for credential plugins
    except ImportError:
        raise ConfigError(
            f"kubeconfig context {context!r}: its user runs a credential plugin (exec or "
            "auth-provider), which needs the kubernetes package: pip install "
            f"'{DISTRIBUTION}[exec-plugins]' (the image has none: use in-cluster config or a token)"
        ) from None

    cfg = client.Configuration()
    config.load_kube_config(
        config_file=str(kubeconfig) if kubeconfig else None,
        context=context,
        client_configuration=cfg,
    )
    auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    token = auth.removeprefix("Bearer ").strip() if auth else None

    def refresh() -> str:
        try:
            return _from_kubernetes_package(kubeconfig, context).token or ""
        except Exception as e:  # the plugin failed: keep the old token, say why
            raise ConfigError(f"credential plugin failed: {e}") from e

    return ClusterAccess(
        server=str(cfg.host).rstrip("/"),
        ca_file=cfg.ssl_ca_cert or None,
        cert_file=cfg.cert_file or None,
        key_file=cfg.key_file or None,
        token=token,
        verify=bool(cfg.verify_ssl),
        proxy=cfg.proxy or None,
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        refresh_token=refresh if token else None,
    )
