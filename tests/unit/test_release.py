"""The release's parts that need no image build: the chart copy, the plain manifest, sums, SBOM."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from image import build, krew, python, release, sbom
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


def test_the_krew_manifest_installs_the_plugin_archive_of_the_release(tmp_path: Path) -> None:
    archive_file, manifest_file = krew.write("1.2.3", tmp_path)
    data = (tmp_path / archive_file).read_bytes()
    assert data == krew.archive("1.2.3")  # the same bytes every time: a stable digest
    plugin = yaml.safe_load((tmp_path / manifest_file).read_text())
    assert (plugin["apiVersion"], plugin["kind"]) == (
        "krew.googlecontainertools.github.com/v1alpha2",
        "Plugin",
    )
    assert plugin["metadata"]["name"] == "zeroscaler"  # krew runs it as `kubectl zeroscaler`
    spec = plugin["spec"]
    assert spec["version"] == "v1.2.3"
    assert spec["homepage"].startswith("https://")
    assert spec["shortDescription"]
    assert len(spec["shortDescription"]) <= 80
    platforms = {
        (p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
        for p in spec["platforms"]
    }
    assert platforms == {
        ("linux", "amd64"),
        ("linux", "arm64"),
        ("darwin", "amd64"),
        ("darwin", "arm64"),
    }
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        launcher = tar.extractfile(members["kubectl-zeroscaler"])
        assert launcher is not None
        script = launcher.read().decode()
    for p in spec["platforms"]:
        # Where the release workflow attaches dist/release/*, under the tag v1.2.3.
        assert p["uri"].endswith(f"/releases/download/v1.2.3/{archive_file}")
        assert p["sha256"] == hashlib.sha256(data).hexdigest()
        assert p["bin"] == "kubectl-zeroscaler"
        assert {f["from"] for f in p["files"]} <= set(members)
    assert members["kubectl-zeroscaler"].mode & 0o111
    # It runs the zeroscaler command of exactly this version, with the arguments kubectl gave.
    assert 'exec zeroscaler "$@"' in script
    assert 'pipx run --spec "kube-zeroscaler==$version" zeroscaler "$@"' in script
    assert "version=1.2.3\n" in script


def test_the_plugin_launcher_runs_the_installed_command_of_its_version(tmp_path: Path) -> None:
    # A stand-in `zeroscaler` on PATH that says its version and echoes its arguments.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "zeroscaler"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "zeroscaler 1.2.3"; exit 0; }\necho "ran: $*"\n'
    )
    fake.chmod(0o755)
    launcher = tmp_path / "kubectl-zeroscaler"
    launcher.write_text(krew.LAUNCHER.format(version="1.2.3"))
    launcher.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    ran = subprocess.run([str(launcher), "status", "-A"], capture_output=True, text=True, env=env)
    assert (ran.returncode, ran.stdout) == (0, "ran: status -A\n")
    other = subprocess.run(
        [str(launcher), "status"],
        capture_output=True,
        text=True,
        env={"PATH": "/nonexistent"},
    )
    assert other.returncode == 1  # neither zeroscaler nor pipx: says what to install
    assert "pipx install kube-zeroscaler==1.2.3" in other.stderr
