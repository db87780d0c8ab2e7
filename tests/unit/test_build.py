"""The wrapper module that builds Kubernetes' commands from published staging modules, and the
pins the builds read."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from localcluster.build import (
    KUBERNETES_ENV,
    PROMETHEUS_MODULE,
    BuildError,
    Versions,
    _helm_parts,
    bin_dir,
    ensure_promql_check,
    load_versions,
    required_version,
    with_kubernetes,
    wrapper_go_mod,
)

PROMQL_CHECK_GO_MOD = Path(__file__).resolve().parents[2] / "localcluster/go/promql-check/go.mod"

RELEASE_GO_MOD = """\
// generated
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
)
"""


def test_wrapper_replaces_each_staging_module_with_its_published_tag() -> None:
    text = wrapper_go_mod(RELEASE_GO_MOD, "1.36.3")
    assert "replace k8s.io/api => k8s.io/api v0.36.3" in text
    assert "replace k8s.io/client-go => k8s.io/client-go v0.36.3" in text
    assert "replace k8s.io/cri-streaming => k8s.io/cri-streaming v0.36.3" in text
    assert text.count("replace ") == 3


def test_wrapper_keeps_go_and_godebug_lines_and_requires_the_release() -> None:
    lines = wrapper_go_mod(RELEASE_GO_MOD, "1.36.3").splitlines()
    assert "go 1.26.0" in lines
    assert "godebug default=go1.26" in lines
    assert "require k8s.io/kubernetes v1.36.3" in lines
    assert not any("./staging" in line for line in lines)


def test_wrapper_refuses_a_go_mod_without_staging_replacements() -> None:
    with pytest.raises(BuildError, match="staging"):
        wrapper_go_mod("module k8s.io/kubernetes\n\ngo 1.26.0\n", "1.36.3")


def test_pinned_versions_key_the_cache_directory() -> None:
    versions = load_versions()
    assert versions.kubernetes.startswith("1.3")
    newer = Versions(
        **{
            **{f: getattr(versions, f) for f in Versions.__dataclass_fields__},
            "kubernetes": "1.99.0",
        }
    )
    assert newer.key != versions.key
    assert versions.key == f"k8s-{versions.kubernetes}_etcd-{versions.etcd}_kwok-{versions.kwok}"


def test_a_helm_pin_leaves_the_control_plane_and_the_other_helm_built() -> None:
    versions = load_versions()
    fields = {f: getattr(versions, f) for f in Versions.__dataclass_fields__}
    other = Versions(**{**fields, "helm": "3.0.0", "helm4": "4.0.0"})
    assert other.key == versions.key
    dirs = [p.directory for p in _helm_parts(versions, print)]
    assert dirs == [f"helm-{versions.helm}", f"helm-{versions.helm4}"]
    files = [p.files for p in _helm_parts(versions, print)]
    assert files == [{"helm": "helm"}, {"helm4": "helm4"}]
    assert versions.helm.startswith("3.")
    assert versions.helm4.startswith("4.")


def test_another_kubernetes_release_is_cached_beside_the_pinned_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KUBERNETES_ENV, raising=False)
    pinned = load_versions()
    monkeypatch.setenv(KUBERNETES_ENV, "1.34.4")
    older = load_versions()
    assert older.kubernetes == "1.34.4"
    assert (older.etcd, older.containerd) == (pinned.etcd, pinned.containerd)
    assert bin_dir(older).parent.parent == bin_dir(pinned).parent.parent
    assert bin_dir(older) != bin_dir(pinned)


@pytest.mark.parametrize("release", ["v1.34.4", " 1.34.4 "])
def test_a_release_may_be_written_with_its_tag_prefix(
    monkeypatch: pytest.MonkeyPatch, release: str
) -> None:
    monkeypatch.setenv(KUBERNETES_ENV, release)
    assert load_versions().kubernetes == "1.34.4"


@pytest.mark.parametrize("release", ["1.34", "latest", "1.34.4-rc.0", "2.0.0"])
def test_a_malformed_release_is_refused_with_the_form_expected(release: str) -> None:
    with pytest.raises(BuildError, match=r"use X\.Y\.Z, e\.g\. 1\.34\.4"):
        with_kubernetes(load_versions(), release)


@pytest.mark.parametrize(
    ("go_mod", "expected"),
    [
        (f"module m\n\nrequire {PROMETHEUS_MODULE} v0.316.0\n", "v0.316.0"),
        (
            f"require (\n\tx.io/y v1.0.0\n\t{PROMETHEUS_MODULE} v0.316.0 // indirect\n)\n",
            "v0.316.0",
        ),
        (f"require {PROMETHEUS_MODULE}/sigv4 v0.5.0\n", None),
        ("module m\n", None),
    ],
)
def test_a_go_mod_says_which_version_it_requires(go_mod: str, expected: str | None) -> None:
    assert required_version(go_mod, PROMETHEUS_MODULE) == expected


def test_the_rules_checker_requires_the_prometheus_versions_toml_pins() -> None:
    pinned = load_versions().prometheus
    assert required_version(PROMQL_CHECK_GO_MOD.read_text(), PROMETHEUS_MODULE) == f"v{pinned}"


def test_a_prometheus_pin_its_go_mod_does_not_follow_is_refused_before_building() -> None:
    other = replace(load_versions(), prometheus="0.1.0")
    with pytest.raises(BuildError, match=r"versions.toml pins prometheus = '0.1.0'.*go get"):
        ensure_promql_check(other)
