"""What every command shares: the connection, one-line failures, the target, who is asking."""

from __future__ import annotations

import argparse
import asyncio
import re
import ssl
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from zeroscaler.api import (
    Conflict,
    Forbidden,
    Kube,
    KubeError,
    NotFound,
    Obj,
    Transient,
)
from zeroscaler.api.credentials import ClusterAccess, ConfigError, load_access
from zeroscaler.cluster.access_reviews import (
    SELF_ACCESS_REVIEWS,
    review_allowed,
    self_access_review,
)
from zeroscaler.core.workloads import WORKLOAD_RESOURCES, workload_path

FIELD_MANAGER = "zeroscaler-cli"
_VERBS = {"GET": "get", "POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


# Exit codes, the same for every command (docs/cli.md, and `zeroscaler --help`).
EXIT_OK = 0
EXIT_FAILED = 1  # the command could not be done: cluster, access, a refusal, nothing found
EXIT_USAGE = 2  # the command line is wrong (argparse's own code for the same)
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class Failure(Exception):
    """A command cannot go on; the message is the one line the person sees."""

    exit_code = EXIT_FAILED


class UsageError(Failure):
    """The command line is wrong: nothing was asked of the cluster."""

    exit_code = EXIT_USAGE


def describe_request(method: str, path: str) -> str:
    """`list deployments.apps in namespace ops`-style words for a REST request."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return f"{_VERBS.get(method, method.lower())} {path}"
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = _VERBS.get(method, method.lower())
    if method == "GET" and not name:
        verb = "list"
    what = f"{resource}.{group}" if group else resource
    if subresource:
        what += f"/{subresource}"
    if name:
        what += f" {name}"
    where = f" in namespace {namespace}" if namespace else ""
    if not namespace and resource != "namespaces" and not name:
        where = " in all namespaces"
    return f"{verb} {what}{where}"


def failure_for(error: KubeError, method: str, path: str, server: str) -> Failure:
    """The one line that says what went wrong with a request, and which."""
    what = describe_request(method, path)
    if isinstance(error, Forbidden):
        if error.status == 401:
            return Failure(f"not authenticated to {server}: the kubeconfig's credentials expired?")
        return Failure(f"access denied: you may not {what} ({error.message or error.reason})")
    if isinstance(error, Transient) and error.status == 0:
        return Failure(f"cannot reach the API server at {server} ({error.reason}: {error.message})")
    return Failure(f"could not {what}: {error}")


class Session:
    """A Kube whose failures become `Failure`s naming the request; reads what commands share."""

    def __init__(self, access: ClusterAccess) -> None:
        self.access = access
        self.kube = Kube(access)

    async def aclose(self) -> None:
        await self.kube.aclose()

    async def call(self, method: str, path: str, work: Awaitable[Any]) -> Any:
        """Await `work`, a request for `method` `path`; NotFound and Conflict pass, others fail."""
        try:
            return await work
        except (NotFound, Conflict):
            raise
        except KubeError as e:
            raise failure_for(e, method, path, self.access.server) from None

    async def get(self, path: str) -> Obj:
        result: Obj = await self.call("GET", path, self.kube.get(path))
        return result

    async def list(
        self,
        path: str,
        *,
        params: Mapping[str, str | int | bool] | None = None,
        metadata_only: bool = False,
    ) -> list[Obj]:
        work = self.kube.list_all(path, params=params, metadata_only=metadata_only)
        items, _ = await self.call("GET", path, work)
        return list(items)

    async def create(self, path: str, body: Obj) -> Obj:
        result: Obj = await self.call("POST", path, self.kube.create(path, body))
        return result

    async def patch(self, path: str, body: Obj) -> Obj:
        work = self.kube.patch(path, body, field_manager=FIELD_MANAGER)
        result: Obj = await self.call("PATCH", path, work)
        return result

    async def now(self) -> datetime:
        """The API server's clock, so a laptop's skewed clock does not move idle clocks."""
        try:
            told = await self.kube.server_time()
        except KubeError:
            told = None
        # A person's command with no server time: the machine's clock is the one they read.
        return told or datetime.now(UTC)

    async def username(self) -> str:
        """Who the API server says we are (SelfSubjectReview)."""
        path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            answer = await self.create(path, review)
        except NotFound:
            raise Failure(
                "the API server does not serve SelfSubjectReview (authentication.k8s.io/v1, "
                "Kubernetes 1.28 or later), so who asked could not be recorded"
            ) from None
        user = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
        return str(user or "unknown user")

    async def may(self, verb: str, resource: str, namespace: str, group: str = "") -> bool:
        """Whether we may do `verb` on `resource` (SelfSubjectAccessReview)."""
        name, _, subresource = resource.partition("/")
        review = self_access_review(verb, group, name, namespace, subresource)
        return review_allowed(await self.create(SELF_ACCESS_REVIEWS, review))

    async def find_workload(self, namespace: str, name: str, kind: str | None) -> Obj:
        """The Deployment or StatefulSet `namespace/name`, with its `kind` set."""
        kinds = [kind] if kind else list(WORKLOAD_RESOURCES)
        found: list[Obj] = []
        denied: list[Failure] = []
        for k in kinds:
            path = workload_path(k, namespace, name)
            try:
                found.append({**await self.get(path), "kind": k})
            except NotFound:
                continue
            except Failure as e:  # may read one kind but not the other: the one readable will do
                denied.append(e)
        if not found:
            if denied:
                raise denied[0]
            what = kind or "Deployment or StatefulSet"
            raise Failure(f"no {what} {namespace}/{name}")
        if len(found) > 1:
            raise Failure(
                f"{namespace}/{name} is both a Deployment and a StatefulSet: "
                f"say which: deployment/{name} or sts/{name} with -n {namespace}"
            )
        return found[0]


# kubectl's names for the two workload types (`kubectl api-resources`): TYPE in `TYPE/NAME`.
WORKLOAD_TYPES = {
    word: kind
    for kind, words in (
        ("Deployment", ("deployment", "deployments", "deploy")),
        ("StatefulSet", ("statefulset", "statefulsets", "sts")),
    )
    for name in words
    for word in (name, f"{name}.apps")
}
# Other types kubectl users write as `TYPE/NAME`: refused, not read as a namespace of that name.
OTHER_TYPES = frozenset(
    f"{name}{suffix}"
    for names in (
        ("pod", "po"),
        ("service", "svc"),
        ("replicaset", "rs"),
        ("daemonset", "ds"),
        ("job",),
        ("cronjob", "cj"),
        ("configmap", "cm"),
        ("secret",),
        ("namespace", "ns"),
    )
    for name in names
    for suffix in ("", "s")
)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
TARGET_FORMS = "NAME, TYPE/NAME (deployment/NAME, sts/NAME) or NAMESPACE/NAME"


@dataclass(frozen=True, slots=True)
class Target:
    """A workload as written on the command line; None where the cluster or the context says."""

    name: str
    namespace: str | None = None
    kind: str | None = None


def parse_target(text: str, namespace: str | None = None, kind: str | None = None) -> Target:
    """`NAME`, `TYPE/NAME` or `NAMESPACE/NAME`, with `-n` and `--kind`, as one Target.

    A first part that is a workload type (`deployment`, `deploy`, `sts`, ...) is the type, as in
    kubectl; any other is a namespace, except kubectl's other type names, which are refused.
    """
    first, sep, name = text.partition("/")
    if not sep:
        first, name = "", first
    if "/" in name or not name or (sep and not first):
        raise UsageError(f"{text!r} is not {TARGET_FORMS}")
    if not _DNS_SUBDOMAIN.fullmatch(name):
        raise UsageError(f"{name!r} in {text!r} is not a Kubernetes object name")
    written = first.lower()
    if written in WORKLOAD_TYPES:
        typed = WORKLOAD_TYPES[written]
        if kind and kind != typed:
            raise UsageError(f"{text!r} names a {typed}, but --kind says {kind}")
        return Target(name, namespace, typed)
    if written in OTHER_TYPES:
        raise UsageError(
            f"{text!r}: zeroscaler manages Deployments and StatefulSets "
            f"(deployment/{name}, sts/{name}); a namespace named {first} goes in -n {first}"
        )
    if first:
        if not _DNS_LABEL.fullmatch(first):
            raise UsageError(f"{text!r}: {first!r} is neither a workload type nor a namespace")
        if namespace and namespace != first:
            raise UsageError(f"{text!r} is in namespace {first}, but -n says {namespace}")
        return Target(name, first, kind)
    return Target(name, namespace, kind)


def add_connection(parser: argparse.ArgumentParser) -> None:
    """The flags that find the cluster; accepted before or after the subcommand."""
    parser.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    parser.add_argument(
        "--context", default=argparse.SUPPRESS, help="kubeconfig context (default: its current)"
    )


def add_namespace(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        default=argparse.SUPPRESS,
        help="namespace (default: the context's)",
    )


def add_target(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """A workload argument in one of TARGET_FORMS (left out, with `optional`), and the
    connection flags."""
    add_connection(parser)
    add_namespace(parser)
    parser.add_argument(
        "workload",
        metavar="WORKLOAD",
        nargs="?" if optional else None,
        help="the Deployment or StatefulSet: NAME, deployment/NAME, sts/NAME or NAMESPACE/NAME",
    )
    parser.add_argument("--kind", choices=sorted(WORKLOAD_RESOURCES), help="when both exist")


def target_of(args: argparse.Namespace, session: Session) -> tuple[str, str, str | None]:
    """(namespace, name, kind or None) of the command's workload argument."""
    target = parse_target(args.workload, option(args, "namespace"), args.kind)
    return target.namespace or session.access.namespace, target.name, target.kind


def option(args: argparse.Namespace, name: str) -> str | None:
    """A connection flag's value, given before or after the subcommand, else None."""
    value = getattr(args, name, None)
    return str(value) if value is not None else None


def run(command: str, args: argparse.Namespace, work: Callable[[Session], Awaitable[int]]) -> int:
    """Connect, run `work`, close; every expected failure is one line on stderr, exit 1 or 2."""

    async def session() -> int:
        access = load_access(option(args, "kubeconfig"), option(args, "context"))
        s = Session(access)
        try:
            return await work(s)
        finally:
            await s.aclose()

    code = EXIT_FAILED
    try:
        return asyncio.run(session())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Failure as e:
        message, code = str(e), e.exit_code
    except ConfigError as e:
        message = str(e)
    except KubeError as e:  # a request not made through Session.call
        message = str(e)
    except (OSError, ssl.SSLError) as e:  # an unreadable CA or key file, say
        message = f"{type(e).__name__}: {e}"
    print(f"zeroscaler {command}: {message}", file=sys.stderr)
    return code
