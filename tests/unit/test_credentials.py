"""Reading kubeconfig files and the in-cluster ServiceAccount, without a cluster."""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from zeroscaler.api.credentials import (
    BearerAuth,
    ClusterAccess,
    ConfigError,
    from_kubeconfig,
    in_cluster,
    load_access,
)
from zeroscaler.certs.issue import new_ca, new_serving_cert


def kubeconfig(
    path: Path,
    *,
    user: dict[str, Any],
    cluster: dict[str, Any] | None = None,
    current: str | None = "main",
) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6443/"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
    }
    if current:
        doc["current-context"] = current
    path.write_text(json.dumps(doc))
    return path


def test_token_and_embedded_ca(tmp_path: Path) -> None:
    ca = new_ca("test")
    cluster = {
        "server": "https://127.0.0.1:6443/",
        "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
    }
    access = from_kubeconfig([kubeconfig(tmp_path / "k", user={"token": "t0"}, cluster=cluster)])
    assert access.server == "https://127.0.0.1:6443"
    assert (access.token, access.ca_data) == ("t0", ca.cert_pem.decode())
    assert access.ssl_context() is not True  # a real context that trusts only that CA


def test_relative_files_are_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    user = {"client-certificate": "pki/u.crt", "client-key": "pki/u.key", "tokenFile": "tok"}
    cluster = {"server": "https://h:1", "certificate-authority": "/abs/ca.crt"}
    access = from_kubeconfig([kubeconfig(tmp_path / "conf" / "k", user=user, cluster=cluster)])
    assert access.cert_file == str(tmp_path / "conf" / "pki" / "u.crt")
    assert access.key_file == str(tmp_path / "conf" / "pki" / "u.key")
    assert access.token_file == str(tmp_path / "conf" / "tok")
    assert access.ca_file == "/abs/ca.crt"


def test_embedded_client_certificate_is_loaded_without_leaving_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A private temporary directory: other processes on the machine write to the shared one.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    ca = new_ca("test")
    pair = new_serving_cert(ca, ["client"], days=1, client=True)
    user = {
        "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
        "client-key-data": base64.b64encode(pair.key_pem).decode(),
    }
    access = from_kubeconfig([kubeconfig(tmp_path / "k", user=user)])
    assert access.ssl_context()
    assert list(scratch.iterdir()) == []


def test_files_merge_first_one_wins(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a", user={"token": "from-a"}, current=None)
    second = kubeconfig(tmp_path / "b", user={"token": "from-b"})
    access = from_kubeconfig([tmp_path / "missing", first, second])
    assert access.token == "from-a"  # the user named "u" is first defined in a


def test_kubeconfig_skip_tls_verify_and_proxy_url_are_honoured(tmp_path: Path) -> None:
    cluster = {
        "server": "https://h:1",
        "insecure-skip-tls-verify": True,
        "proxy-url": "http://127.0.0.1:3128",
    }
    access = from_kubeconfig([kubeconfig(tmp_path / "k", user={"token": "t"}, cluster=cluster)])
    assert access.ssl_context() is False
    assert access.proxy == "http://127.0.0.1:3128"
    assert access.tls_server_name is None


def test_kubeconfig_tls_server_name_overrides_the_name_checked(tmp_path: Path) -> None:
    cluster = {"server": "https://127.0.0.1:6443", "tls-server-name": "api.internal"}
    access = from_kubeconfig([kubeconfig(tmp_path / "k", user={"token": "t"}, cluster=cluster)])
    assert (access.server, access.tls_server_name) == ("https://127.0.0.1:6443", "api.internal")


@pytest.mark.parametrize(
    ("user", "cluster", "current", "message"),
    [
        ({"token": "t"}, None, None, "no current-context"),
        ({"username": "a", "password": "b"}, None, "main", "basic auth"),
        ({"token": "t"}, {"server": ""}, "main", "has no server"),
        ({"client-key-data": "%%%"}, None, "main", "client-key-data is not base64"),
        ({"token": "t"}, None, "other", "no context named 'other'"),
    ],
)
def test_unusable_kubeconfigs_say_why(
    tmp_path: Path,
    user: dict[str, Any],
    cluster: dict[str, Any] | None,
    current: str | None,
    message: str,
) -> None:
    path = kubeconfig(tmp_path / "k", user=user, cluster=cluster, current=current)
    with pytest.raises(ConfigError, match=message):
        from_kubeconfig([path], None if current == "main" else current)


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_access(str(tmp_path / "nope"))


async def test_exec_credentials_are_asked_for_again_after_a_401(tmp_path: Path) -> None:
    source = tmp_path / "issued"
    source.write_text("first")
    plugin = (
        "import json, sys; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',"
        " 'kind': 'ExecCredential', 'status': {'token': open(sys.argv[1]).read()}}))"
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": ["-c", plugin, str(source)],
            "interactiveMode": "Never",
        }
    }
    access = load_access(str(kubeconfig(tmp_path / "k", user=user)))
    assert (access.server, access.token) == ("https://127.0.0.1:6443", "first")

    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if request.headers["Authorization"] == "Bearer second" else 401)

    source.write_text("second")  # the first token expired; the plugin now hands out another
    transport = httpx.MockTransport(server)
    async with httpx.AsyncClient(transport=transport, auth=access.auth()) as client:
        assert (await client.get("https://h/api")).status_code == 200


def test_exec_credentials_without_the_kubernetes_package_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as in the image: not installed
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}
    with pytest.raises(ConfigError, match=r"zeroscaler\[exec-plugins\]"):
        load_access(str(kubeconfig(tmp_path / "k", user=user)))


def test_in_cluster_reads_the_mounted_service_account(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    access = in_cluster(env, tmp_path)
    assert access == ClusterAccess(
        server="https://[fd00::1]:443",
        ca_file=str(tmp_path / "ca.crt"),
        token_file=str(tmp_path / "token"),
    )
    with pytest.raises(ConfigError, match="not in a cluster"):
        in_cluster({}, tmp_path)
    (tmp_path / "namespace").write_text("ops\n")
    assert in_cluster(env, tmp_path).namespace == "ops"


def test_the_context_names_the_default_namespace(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "k", user={"token": "t"})
    assert from_kubeconfig([path]).namespace == "default"
    doc = json.loads(path.read_text())
    doc["contexts"][0]["context"]["namespace"] = "team-a"
    path.write_text(json.dumps(doc))
    assert from_kubeconfig([path]).namespace == "team-a"


def test_a_rotated_token_file_is_read_again_after_a_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    seen: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        return httpx.Response(200 if request.headers["Authorization"] == "Bearer new" else 401)

    auth = ClusterAccess("https://h", token_file=str(token)).auth()
    client = httpx.Client(transport=httpx.MockTransport(server), auth=auth)
    assert client.get("https://h/api").status_code == 401  # the file still says old
    token.write_text("new\n")
    assert client.get("https://h/api").status_code == 200
    # The second request still sends the cached token; its 401 makes the file be read again.
    assert seen == ["Bearer old", "Bearer old", "Bearer new"]


async def test_a_failing_reload_keeps_the_token_it_had() -> None:
    def broken() -> str:
        raise ConfigError("credential plugin failed: exit 1")

    sent: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["Authorization"])
        return httpx.Response(401)

    auth = BearerAuth(broken, initial="held")
    async with httpx.AsyncClient(transport=httpx.MockTransport(server), auth=auth) as c:
        # The 401 comes back; the reload's failure does not.
        assert (await c.get("https://h/api")).status_code == 401
    assert sent == ["Bearer held"]
