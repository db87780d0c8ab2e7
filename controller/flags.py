"""Controller configuration: command-line flags over `ZEROSCALER_*` environment variables.

Plain dataclasses and argparse rather than pydantic-settings: the controller runs all day, and that
import and the `kubernetes` package's together hold megabytes it never needs
(`bench/bench_memory.py` measures them).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)
ENV_PREFIX = "ZEROSCALER_"


def _default_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Everything the controller can be told."""

    kubeconfig: str | None = None
    dry_run: bool = False
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080  # 0: no HTTP endpoints
    workload_metrics: bool = True  # off: cluster totals only, no series per workload
    # On: HTTPS, and /metrics only to a bearer token the API server allows to get it.
    metrics_auth: bool = False
    lease_namespace: str = "zeroscaler"
    policy_namespace: str = ""  # empty: the lease namespace (the chart's release namespace)
    exclude_namespaces: str = "kube-system"  # comma-separated; policy is never applied there
    lease_name: str = "zeroscaler-controller"
    id: str = field(default_factory=_default_id)
    lease_duration: float = 15.0
    discovery_interval: float = 30.0
    access_review_ttl: float = 60.0
    access_from_rbac: bool = True  # off where an authorizer before RBAC (a webhook) may deny
    # Watched types listed as watch-list streams where served; off: in pages a start at 10,000
    # workloads costs less CPU (docs/figures.md at 89e3618, "Pages or streams").
    streaming_lists: bool = False
    warm_watches: bool = True  # on a start, list the types workloads name before reconciling them
    workers: int = 64  # coroutines; requests queue for the request connections
    # For watches, one each; the shared watches by namespace may take all but 128 of them.
    max_connections: int = 4096
    request_connections: int = 16  # all kept alive
    api_qps: float = 0.0  # requests a second after a burst; 0: no limit but the server's 429s
    api_burst: int = 1000
    log_level: LogLevel = "info"
    log_format: LogFormat = "text"  # text: logfmt
    # The activator (docs/DESIGN.md): its MutatingWebhookConfiguration, made by the chart; empty:
    # off, and workloads that serve admission webhooks are never put to sleep.
    activator_configuration: str = ""
    # zeroscaler's own: its client settings are copied, and it is given its secret path.
    webhook_configuration: str = "zeroscaler"
    activator_requests: str = "zeroscaler-activator-requests"  # ConfigMap the webhook writes
    activator_timeout: int = 10  # seconds the API server waits for it (and it for a wake)
    activator_probe_interval: float = 10.0
    # Seconds over which sleepers are woken after a keep-awake window's start, each at a moment
    # of its own, so that a window over thousands of workloads does not wake them in one instant.
    keep_awake_jitter: float = 60.0

    @property
    def policy_source(self) -> str:
        """The namespace whose policy ConfigMaps are in force."""
        return self.policy_namespace or self.lease_namespace

    @property
    def excluded(self) -> frozenset[str]:
        """Namespaces policy is never applied in: the excluded ones and the policy's own."""
        names = (n.strip() for n in self.exclude_namespaces.split(","))
        return frozenset([*(n for n in names if n), self.policy_source])

    def __post_init__(self) -> None:
        for name, low, high in _BOUNDS:
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} must be in [{low}, {high}], not {value}")
        if self.lease_duration <= 0 or self.discovery_interval <= 0:
            raise ValueError("lease_duration and discovery_interval must be positive")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        if self.log_format not in LOG_FORMATS:
            raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}")


_BOUNDS: tuple[tuple[str, float, float], ...] = (
    ("metrics_port", 0, 65535),
    ("access_review_ttl", 0, float("inf")),
    ("workers", 1, 10_000),
    ("max_connections", 8, 100_000),
    ("request_connections", 1, 16),
    ("api_qps", 0, 100_000),
    ("api_burst", 1, 1_000_000),
    ("activator_timeout", 2, 30),
    ("activator_probe_interval", 0.1, 3600),
    ("keep_awake_jitter", 0, 3600),
)


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


_PARSERS: Mapping[str, Callable[[str], Any]] = {
    "bool": _boolean,
    "int": int,
    "float": float,
}


def _from_environment(
    environ: Mapping[str, str], skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Fields set by `ZEROSCALER_<FIELD>` variables, converted to the field's type.

    Fields in `skip` (given as flags) are not read: Kubernetes sets `<SERVICE>_PORT=tcp://...`
    for every Service in the namespace, and one named like a field must not stop the process.
    """
    values: dict[str, Any] = {}
    for f in dataclasses.fields(ControllerSettings):
        if f.name in skip:
            continue
        raw = environ.get(ENV_PREFIX + f.name.upper())
        if raw is None:
            continue
        parse = _PARSERS.get(str(f.type), str)
        try:
            values[f.name] = parse(raw)
        except ValueError as e:
            raise ValueError(f"{ENV_PREFIX}{f.name.upper()}={raw!r}: {e}") from None
    return values


def _cluster_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the cluster and this replica")
    group.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    group.add_argument(
        "--id", help="this replica's identity in the Lease (default: $POD_NAME, else host-pid)"
    )
    group.add_argument("--lease-namespace", help="namespace of the leader-election Lease")
    group.add_argument("--lease-name", help="name of the leader-election Lease")
    group.add_argument("--lease-duration", type=float, help="seconds a leader holds the Lease")


def _behaviour_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what it manages and how")
    group.add_argument(
        "--dry-run",
        action="store_true",
        default=None,
        help="log and emit Events for what would be done; change nothing",
    )
    group.add_argument(
        "--policy-namespace",
        help="namespace of the policy ConfigMaps (default: the lease namespace)",
    )
    group.add_argument(
        "--exclude-namespaces",
        help="comma-separated namespaces policy is never applied in (default: kube-system)",
    )
    group.add_argument("--workers", type=int, help="concurrent reconciles")
    group.add_argument(
        "--access-review-ttl", type=float, help="seconds a SubjectAccessReview answer is kept"
    )
    group.add_argument(
        "--access-from-rbac",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="take a watch RBAC grants as allowed without a SubjectAccessReview (default: on; "
        "turn off when an authorizer ahead of RBAC, such as a webhook, may deny)",
    )
    group.add_argument(
        "--discovery-interval", type=float, help="seconds between API discovery refreshes"
    )
    group.add_argument(
        "--keep-awake-jitter",
        type=float,
        help="seconds over which sleepers are woken after a keep-awake window starts, each at "
        "its own moment (default: 60; 0: all at the start)",
    )


def _api_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("requests to the API server")
    group.add_argument(
        "--streaming-lists",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="list each watched type as a watch that sends the collection first "
        "(sendInitialEvents), where the API server offers it, instead of in pages (default: off)",
    )
    group.add_argument(
        "--warm-watches",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="on a start, list the types the workloads' annotations name as soon as the "
        "workloads are seen, before each is reconciled (default: on)",
    )
    group.add_argument(
        "--api-qps",
        type=float,
        help="requests a second to the API server once a burst is spent (0: no client-side limit)",
    )
    group.add_argument(
        "--api-burst", type=int, help="requests sent at once before --api-qps applies"
    )


def _activator_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the activator")
    group.add_argument(
        "--activator-configuration",
        help="the activator's MutatingWebhookConfiguration (empty: no activator, and workloads "
        "serving admission webhooks are never put to sleep)",
    )
    group.add_argument(
        "--webhook-configuration",
        help="zeroscaler's own MutatingWebhookConfiguration: the activator copies its client "
        "settings, and a Service-backed webhook in it without a path is given a secret one",
    )
    group.add_argument("--activator-requests", help="the ConfigMap the webhook asks for wakes in")
    group.add_argument(
        "--activator-timeout", type=int, help="seconds the API server waits for the activator"
    )
    group.add_argument(
        "--activator-probe-interval",
        type=float,
        help="seconds between probes of the activator while it covers anything",
    )


def _output_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("metrics and logs")
    group.add_argument("--metrics-host", help="address for /metrics, /healthz, /readyz")
    group.add_argument("--metrics-port", type=int, help="port for /metrics etc. (0: none)")
    group.add_argument(
        "--workload-metrics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="each managed workload's own series on /metrics (default: on; turn off on "
        "huge clusters to keep only the cluster totals)",
    )
    group.add_argument(
        "--metrics-auth",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve HTTPS (a certificate made at start) and /metrics only to a bearer token "
        "the API server allows to get it, as kube-rbac-proxy does (default: off)",
    )
    group.add_argument("--log-level", choices=LOG_LEVELS)
    group.add_argument(
        "--log-format", choices=LOG_FORMATS, help="text (logfmt, the default) or json"
    )


def parse_settings(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> ControllerSettings:
    """ControllerSettings from the command line, falling back to the environment and defaults."""
    parser = argparse.ArgumentParser(
        prog="zeroscaler-controller",
        description="Scale idle operators to zero and wake them on the first change.",
    )
    for add_flags in (
        _cluster_flags,
        _behaviour_flags,
        _api_flags,
        _activator_flags,
        _output_flags,
    ):
        add_flags(parser)
    args = parser.parse_args(argv)
    environ = os.environ if environ is None else environ
    try:
        flags = {k: v for k, v in vars(args).items() if v is not None}
        values = _from_environment(environ, frozenset(flags))
        values.update(flags)
        # A container restarted in the same pod keeps its identity, so it finds the Lease its own.
        if "id" not in values and environ.get("POD_NAME"):
            values["id"] = environ["POD_NAME"]
        return ControllerSettings(**values)
    except ValueError as e:
        parser.error(str(e))
