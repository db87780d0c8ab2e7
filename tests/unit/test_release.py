"""The release's parts that need no image build: the chart copy, the plain manifest, sums, SBOM."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from image import build, cli_bundle, krew, python, release, sbom
from image.debian import load_lock, lock_path
from image.platform import AMD64, ARM64

DIGEST = "sha256:" + "ab" * 32


def test_set_value_changes_one_key_and_keeps_the_comments() -> None:
    text = (release.CHART / "values.yaml").read_text()
    edited = release.set_value(text, "image", "digest", f'"{DIGEST}"')
    assert yaml.safe_load(edited)["image"]["digest"] == DIGEST
    assert edited.count("\n") == text.count("\n")
    assert [line for line in edited.splitlines() if line.lstrip().startswith("#")] == [
        line for line in text.splitlines() if line.lstrip().startswith("#")
    ]
    with pytest.raises(release.ReleaseError, match=r"no image\.nothing"):
        release.set_value(text, "image", "nothing", '""')
    with pytest.raises(release.ReleaseError, match="no top-level"):
        release.set_value(text, "absent", "digest", '""')


def test_sums_find_a_changed_file(tmp_path: Path) -> None:
    (tmp_path / "a.tgz").write_bytes(b"chart")
    (tmp_path / "b.yaml").write_text("kind: Namespace\n")
    release.write_sums(tmp_path)
    assert len((tmp_path / "SHA256SUMS").read_text().splitlines()) == 2
    release.check_sums(tmp_path)
    (tmp_path / "a.tgz").write_bytes(b"other")
    with pytest.raises(release.ReleaseError, match=r"a\.tgz"):
        release.check_sums(tmp_path)


def test_a_version_other_than_the_projects_is_refused(tmp_path: Path) -> None:
    with pytest.raises(release.ReleaseError, match="bump pyproject"):
        release.make("99.0.0", tmp_path / "out", {}, lambda _: None)
    assert not (tmp_path / "out").exists()


def test_sbom_lists_each_platforms_locked_packages(tmp_path: Path) -> None:
    out = tmp_path / "bom.json"
    images = [(AMD64, "sha256:" + "1" * 64), (ARM64, "sha256:" + "2" * 64)]
    sbom.write(out, build.version(), images, build.ZEROSCALER)
    doc = json.loads(out.read_text())
    assert doc["bomFormat"] == "CycloneDX"
    assert doc["metadata"]["component"]["name"] == "zeroscaler"
    assert doc["metadata"]["component"]["purl"] == f"pkg:pypi/kube-zeroscaler@{build.version()}"
    got = sbom.read_components(out)
    assert set(got) == {"linux/amd64", "linux/arm64/v8"}
    for platform in (AMD64, ARM64):
        purls = {str(c["purl"]) for c in got[platform.oci]}
        for package in load_lock(lock_path(platform)):
            assert any(p.startswith(f"pkg:deb/debian/{package.name}@") for p in purls)
        wheels = python.locked(build.ZEROSCALER.lock_for(platform))
        for name, (version, hashes) in wheels.items():
            (entry,) = [
                c for c in got[platform.oci] if c["purl"] == f"pkg:pypi/{_pep503(name)}@{version}"
            ]
            assert {h["content"] for h in entry["hashes"]} == set(hashes)  # type: ignore[attr-defined]
    # The same inputs give the same file.
    again = tmp_path / "again.json"
    sbom.write(again, build.version(), images, build.ZEROSCALER)
    assert again.read_bytes() == out.read_bytes()


def _pep503(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_chart_lists_the_released_image_for_artifact_hub() -> None:
    text = (release.CHART / "Chart.yaml").read_text()
    edited = release.set_listed_image(text, "1.2.3", DIGEST)
    [image] = yaml.safe_load(yaml.safe_load(edited)["annotations"]["artifacthub.io/images"])
    assert image["image"] == f"ghcr.io/zeroscaler/zeroscaler:1.2.3@{DIGEST}"
    assert edited.count("\n") == text.count("\n")
    without = re.sub(r"(?m)^\s+image: .*\n", "", text)
    with pytest.raises(release.ReleaseError, match=r"artifacthub\.io/images"):
        release.set_listed_image(without, "1.2.3", DIGEST)


def test_the_krew_manifest_installs_each_architectures_self_contained_archive(
    tmp_path: Path,
) -> None:
    archives = {}
    for arch in ("amd64", "arm64"):
        path = tmp_path / f"zeroscaler-1.2.3-linux-{arch}.tar.gz"
        path.write_bytes(arch.encode() * 10)
        archives[arch] = path
    manifest_file = krew.write("1.2.3", tmp_path, archives)
    plugin = yaml.safe_load((tmp_path / manifest_file).read_text())
    assert (plugin["apiVersion"], plugin["kind"]) == (
        "krew.googlecontainertools.github.com/v1alpha2",
        "Plugin",
    )
    assert plugin["metadata"]["name"] == "zeroscaler"  # krew runs it as `kubectl zeroscaler`
    spec = plugin["spec"]
    assert spec["version"] == "v1.2.3"
    assert spec["homepage"].startswith("https://")
    assert 0 < len(spec["shortDescription"]) <= 80
    assert "pipx install kube-zeroscaler==1.2.3" in spec["caveats"]
    by_arch = {p["selector"]["matchLabels"]["arch"]: p for p in spec["platforms"]}
    assert set(by_arch) == {"amd64", "arm64"}
    for arch, p in by_arch.items():
        assert p["selector"]["matchLabels"]["os"] == "linux"
        # Where the release workflow attaches dist/release/*, under the tag v1.2.3.
        assert p["uri"].endswith(f"/releases/download/v1.2.3/zeroscaler-1.2.3-linux-{arch}.tar.gz")
        assert p["sha256"] == hashlib.sha256(archives[arch].read_bytes()).hexdigest()
        assert p["bin"] == cli_bundle.LAUNCHER_NAME
        assert p["files"] == [{"from": "*", "to": "."}]


def _fake_runtime(tmp_path: Path) -> Path:
    """An unpacked archive whose `loader` only prints what it was asked to run, and with what."""
    top = tmp_path / "store"
    loader = top / cli_bundle.RUNTIME / cli_bundle.LOADERS["amd64"]
    loader.parent.mkdir(parents=True)
    said = 'echo "PYTHONHOME=$PYTHONHOME PYTHONPATH=$PYTHONPATH"'
    loader.write_text(f'#!/bin/sh\n{said}\necho "$@"\n')
    loader.chmod(0o755)
    launcher = top / cli_bundle.LAUNCHER_NAME
    launcher.write_text(
        cli_bundle.LAUNCHER.format(
            version="1.2.3", arch="amd64", runtime=cli_bundle.RUNTIME, site=build.SITE,
            loader=cli_bundle.LOADERS["amd64"], triplet=AMD64.triplet,
        )
    )  # fmt: skip
    launcher.chmod(0o755)
    return launcher


def test_the_launcher_starts_the_bundled_interpreter_through_the_bundled_loader(
    tmp_path: Path,
) -> None:
    launcher = _fake_runtime(tmp_path)
    # krew links the launcher into its bin directory: the runtime is found beside the target.
    linked = tmp_path / "bin" / "kubectl-zeroscaler"
    linked.parent.mkdir()
    linked.symlink_to(launcher)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/elsewhere", "PYTHONSTARTUP": "/x.py"}
    ran = subprocess.run([str(linked), "status", "-A"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    rt = launcher.parent / cli_bundle.RUNTIME
    said, argv = ran.stdout.splitlines()
    assert said == f"PYTHONHOME={rt}/usr PYTHONPATH={rt}/{build.SITE}"
    assert argv == (
        f"--library-path {rt}/lib/x86_64-linux-gnu:{rt}/usr/lib/x86_64-linux-gnu "
        f"{rt}/usr/bin/python3.11 -s {rt}/bin/kubectl-zeroscaler status -A"
    )
    # Under its own name it is the plain command; an emulator, when named, runs the loader.
    plain = launcher.parent / "zeroscaler"
    plain.symlink_to(cli_bundle.LAUNCHER_NAME)
    echo = tmp_path / "emulator"
    echo.write_text('#!/bin/sh\necho "emulated: $1"\n')
    echo.chmod(0o755)
    env["ZEROSCALER_EMULATOR"] = str(echo)
    ran = subprocess.run([str(plain), "check"], capture_output=True, text=True, env=env)
    assert ran.stdout == f"emulated: {rt}/{cli_bundle.LOADERS['amd64']}\n"
    del env["ZEROSCALER_EMULATOR"]
    ran = subprocess.run([str(plain), "check"], capture_output=True, text=True, env=env)
    assert ran.stdout.splitlines()[1].endswith(f"{rt}/bin/zeroscaler check")


def _dist(site: Path, name: str, version: str, *requires: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(["Metadata-Version: 2.1", *lines]) + "\n\nbody\n")


def test_the_command_carries_the_closure_of_its_dependencies_only(tmp_path: Path) -> None:
    site = tmp_path / "site"
    requirements = build._PROJECT["dependencies"]
    direct = sorted(re.split(r"[<>=!~ \[;]", r, maxsplit=1)[0] for r in requirements)
    for name in direct:
        _dist(site, name.lower(), "1.0")
    _dist(site, "anyio", "4.0", "idna>=2.8", 'exceptiongroup>=1; python_version < "3.11"',
          'trio>=0.26; extra == "trio"')  # fmt: skip
    _dist(site, "idna", "3.0")
    _dist(site, "fastapi", "0.115", "starlette")  # the server extra's: left out
    _dist(site, "starlette", "0.40")
    # httpx needs anyio in this made-up site; pyproject's own list is read as it is.
    (site / "httpx-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: httpx\nVersion: 1.0\nRequires-Dist: anyio\n"
    )
    names = [p.name for p in cli_bundle.cli_distributions(site, AMD64)]
    expected = {f"{n.lower()}-1.0.dist-info" for n in direct} | {
        "anyio-4.0.dist-info",
        "idna-3.0.dist-info",
    }
    assert names == sorted(expected)  # not fastapi, starlette: the server extra's
    (site / "idna-3.0.dist-info" / "METADATA").unlink()
    with pytest.raises(build.BuildError, match="needs idna"):
        cli_bundle.cli_distributions(site, AMD64)


def test_the_release_workflow_publishes_only_after_every_test_passed() -> None:
    workflow = yaml.safe_load((build.REPO / ".github/workflows/release.yml").read_text())
    [job] = workflow["jobs"].values()
    runs = [str(step.get("run", "")) for step in job["steps"]]
    tests = next(i for i, r in enumerate(runs) if "bash .ci/run" in r)
    publish = next(i for i, r in enumerate(runs) if "make push" in r)
    attach = next(i for i, s in enumerate(job["steps"]) if "action-gh-release" in s.get("uses", ""))
    assert tests < publish
    assert tests < attach
    ci = (build.REPO / ".ci/run").read_text()
    assert ci.index("make package-check") < ci.index("make test")
