"""The release's parts that need no image build: the chart copy, the plain manifest, sums, SBOM."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from image import build, python, release, sbom
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
