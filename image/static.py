"""Images of one static binary (the example Go operator): no shell, no libraries, no package
manager; only the binary, the users it runs as and a writable /tmp, run as 65532 (nonroot)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from image.build import GROUP, PASSWD, USER, Result, version
from oci import archive


@dataclass(frozen=True, slots=True)
class StaticSpec:
    """A static binary and the image around it."""

    repository: str
    title: str
    binary: Callable[[Callable[[str], None]], Path]  # builds or finds it; given a progress
    path: str  # where the binary goes in the image

    def name(self) -> str:
        return f"docker.io/library/{self.repository}:{version()}"


def _widget_operator(say: Callable[[str], None]) -> Path:
    from localcluster import build as tools  # the Go build, pinned and cached with the others

    return tools.ensure_widget_operator(progress=say)


WIDGET_OPERATOR = StaticSpec(
    repository="widget-operator",
    title="widget-operator (zeroscaler example)",
    binary=_widget_operator,
    path="/widget-operator",
)


def _cert_manager(say: Callable[[str], None]) -> Path:
    from localcluster import build as tools

    return tools.ensure_cert_manager(progress=say)[tools.CERT_MANAGER]


CERT_MANAGER = StaticSpec(
    repository="cert-manager-controllers",
    title="cert-manager's certificate controllers (zeroscaler example)",
    binary=_cert_manager,
    path="/cert-manager",
)
SPECS = {"widget-operator": WIDGET_OPERATOR, "cert-manager": CERT_MANAGER}


def pack(spec: StaticSpec, out: Path, names: list[str], say: Callable[[str], None]) -> Result:
    """Build (or find) the binary and write the image archive: a base layer and the binary's."""
    binary = spec.binary(say)
    base = archive.make_layer(
        [
            archive.Entry("/etc", 0o755, "dir"),
            archive.Entry("/etc/passwd", 0o644, data=PASSWD.encode()),
            archive.Entry("/etc/group", 0o644, data=GROUP.encode()),
            archive.Entry("/tmp", 0o1777, "dir"),
            archive.Entry("/home", 0o755, "dir"),
            archive.Entry("/home/nonroot", 0o700, "dir", uid=USER, gid=USER),
        ],
        "users and /tmp",
    )
    data = binary.read_bytes()
    ours = archive.make_layer(
        [archive.Entry(spec.path, 0o755, data=data)], f"{spec.title} {version()}"
    )
    image = archive.Image(
        layers=[base, ours],
        names=names,
        user=f"{USER}:{USER}",
        env=("HOME=/home/nonroot",),
        entrypoint=[spec.path],
        labels={
            "org.opencontainers.image.title": spec.title,
            "org.opencontainers.image.version": version(),
            "org.opencontainers.image.licenses": "Apache-2.0",
        },
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    digest = archive.write_archive(image, out)
    say(f"layer {spec.repository}: {len(data) / 1e6:.1f} MB, {ours.size / 1e6:.1f} MB compressed")
    return Result(out, digest, names, [base, ours], len(data) + len(PASSWD) + len(GROUP), image)
