"""The release's software bill of materials, in CycloneDX, made from the lock files.

One container component per platform (its manifest digest), each holding the Debian packages
and the Python wheels of that platform's locks with their purls and SHA-256 sums. zeroscaler
itself is the BOM's subject, its package URL the distribution's name on the package index. The
serial number and time come from the index and the commit, so the same release gives the same
file.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import DisjunctiveLicense
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from image import build, debian, python
from image.platform import Platform

PLATFORM_PROPERTY = "zeroscaler:platform"


def make(version: str, images: Sequence[tuple[Platform, str]], spec: build.Spec) -> Bom:
    """The BOM of the images (platform, manifest digest) built from spec's locks."""
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"zeroscaler:{version}:{images}"))
    bom.metadata.timestamp = _commit_time()
    bom.metadata.component = Component(
        name="zeroscaler",
        version=version,
        type=ComponentType.APPLICATION,
        bom_ref=f"zeroscaler@{version}",
        purl=PackageURL("pypi", name=build.DISTRIBUTION, version=version),
        licenses=[DisjunctiveLicense(id="Apache-2.0")],
    )
    for platform, digest in images:
        image = Component(
            name="zeroscaler",
            version=version,
            type=ComponentType.CONTAINER,
            bom_ref=f"image:{platform.oci}",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest.removeprefix("sha256:"))],
            properties=[Property(name=PLATFORM_PROPERTY, value=platform.oci)],
        )
        parts: list[Component] = []
        for package in debian.load_lock(debian.lock_path(platform)):
            purl = PackageURL(
                "deb",
                "debian",
                package.name,
                package.version,
                {"arch": package.architecture, "distro": "debian-12"},
            )
            parts.append(
                _component(package.name, package.version, purl, platform, [package.sha256])
            )
        for name, (pinned, hashes) in python.locked(spec.lock_for(platform)).items():
            purl = PackageURL("pypi", name=name.lower(), version=pinned)
            parts.append(_component(name, pinned, purl, platform, hashes))
        image.components.update(parts)
        bom.components.add(image)
        bom.register_dependency(image, parts)
        bom.register_dependency(bom.metadata.component, [image])
    return bom


def write(
    path: Path, version: str, images: Sequence[tuple[Platform, str]], spec: build.Spec
) -> None:
    """Write the BOM as CycloneDX 1.6 JSON, checked against the schema first."""
    text = JsonV1Dot6(make(version, images, spec)).output_as_string(indent=2)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise ValueError(f"the SBOM does not validate against CycloneDX 1.6: {error}")
    path.write_text(text + "\n")


def read_components(path: Path) -> dict[str, list[dict[str, object]]]:
    """Each platform's components (name, version, purl, hashes) of a written BOM."""
    doc = json.loads(path.read_text())
    out: dict[str, list[dict[str, object]]] = {}
    for image in doc.get("components", []):
        props = {p["name"]: p["value"] for p in image.get("properties", [])}
        out[props[PLATFORM_PROPERTY]] = image.get("components", [])
    return out


def _component(
    name: str, version: str, purl: PackageURL, platform: Platform, hashes: Sequence[str]
) -> Component:
    return Component(
        name=name,
        version=version,
        type=ComponentType.LIBRARY,
        bom_ref=f"{platform.debian}:{purl.to_string()}",
        purl=purl,
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=h) for h in hashes],
    )


def _commit_time() -> datetime:
    proc = subprocess.run(
        ["git", "-C", str(build.REPO), "log", "-1", "--format=%ct"], capture_output=True, text=True
    )
    if proc.returncode == 0 and proc.stdout.strip():
        return datetime.fromtimestamp(int(proc.stdout.strip()), UTC)
    return datetime.now(UTC)
