"""A release: the image for every platform as one OCI index, the chart, a plain manifest, an SBOM.

`python -m image release` writes into one directory:

- `zeroscaler-image-VERSION.oci.tar`: an OCI image layout whose one entry is the image index of
  linux/amd64 and linux/arm64/v8 (`crane push` of the unpacked layout pushes that index);
- `zeroscaler-VERSION.tgz`: the chart (`helm package`), its version and appVersion VERSION and
  its `image.digest` the index's, so an install pulls exactly the released image;
- `zeroscaler-VERSION.yaml`: the chart rendered with its defaults, for `kubectl apply`;
- `zeroscaler-VERSION.cdx.json`: a CycloneDX SBOM of each platform's image, from the locks;
- `zeroscaler-VERSION-linux-ARCH.tar.gz`: the self-contained `zeroscaler` command of each
  architecture (`image.cli_bundle`), and `zeroscaler-VERSION.krew.yaml`, the krew manifest that
  installs it as `kubectl zeroscaler` from the GitHub release;
- the wheel and the sdist (`kube_zeroscaler-VERSION-py3-none-any.whl`, `.tar.gz`), what
  `pip install` installs;
- `release.json`: digests, sizes and timings; `SHA256SUMS`: `sha256sum -c` checks every file.

Before writing the sums, every foreign platform's interpreter is started under qemu on the
image's own root filesystem, unpacked from the index, and must import zeroscaler's entry points;
each command archive, unpacked, must say its version (the foreign one under qemu).
`python -m image push` sends the index and the chart to an OCI registry with crane and helm.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from image import build, cli_bundle, debian, krew, sbom
from image.platform import Platform
from oci import archive

CHART = build.REPO / "charts" / "zeroscaler"
NAMESPACE = "zeroscaler"  # the plain manifest's; a chart install picks its own
# Imported by each foreign platform's interpreter under emulation: the commands' modules.
PROOF_IMPORTS = (
    "zeroscaler.cli.controller_main",
    "zeroscaler.cli.webhook_main",
    "zeroscaler.cli.combined_main",
    "zeroscaler.cli",
    "ssl",
    "cryptography.hazmat.bindings._rust",
    "pydantic_core",
)
# Hooks that only run when a release is removed or tested: a `kubectl apply` user has neither.
_NOT_APPLIED_HOOKS = {"pre-delete", "post-delete", "test", "test-success"}
Progress = Callable[[str], None]


class ReleaseError(Exception):
    """A release step failed; the message names it."""


@dataclass(frozen=True, slots=True)
class Files:
    """The names of a release's files, for a version."""

    version: str

    @property
    def index(self) -> str:
        return f"zeroscaler-image-{self.version}.oci.tar"

    @property
    def chart(self) -> str:
        return f"zeroscaler-{self.version}.tgz"

    @property
    def manifest(self) -> str:
        return f"zeroscaler-{self.version}.yaml"

    @property
    def sbom(self) -> str:
        return f"zeroscaler-{self.version}.cdx.json"


def make(
    version: str,
    out: Path,
    tools: Mapping[str, Path],
    say: Progress,
    platforms: tuple[Platform, ...] = build.ZEROSCALER.platforms,
) -> dict[str, Any]:
    """Build the release into out (emptied first); returns what release.json records."""
    if version != build.version():
        raise ReleaseError(
            f"VERSION {version} is not pyproject.toml's version {build.version()}: the image's "
            "labels, the package metadata and the chart must agree, so bump pyproject.toml first"
        )
    started = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    files = Files(version)
    cache = debian.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    results: dict[Platform, build.Result] = {}
    commands: dict[Platform, Path] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="release-", dir=cache) as scratch:
        for platform in platforms:
            begun = time.monotonic()
            root = Path(scratch) / f"rootfs-{platform.debian}"
            build.assemble(root, cache, say, build.ZEROSCALER, platform)
            tar = Path(scratch) / f"{platform.debian}.tar"
            results[platform] = build.pack(root, tar, [], say, build.ZEROSCALER, platform)
            seconds[f"image {platform.debian}"] = round(time.monotonic() - begun, 1)
            begun = time.monotonic()
            commands[platform] = cli_bundle.write(root, platform, version, out)
            shutil.rmtree(root)
            prove_command(commands[platform], platform, version, cache, say)
            seconds[f"command {platform.debian}"] = round(time.monotonic() - begun, 1)
    say("writing the image index")
    index_path = out / files.index
    digest = archive.write_index([r.image for r in results.values()], index_path, version)
    checked = archive.validate_index(index_path, [p.oci for p in platforms])
    say(f"index {digest} validates: {', '.join(sorted(checked['configs']))}")
    begun = time.monotonic()
    for platform in platforms:
        if not platform.native:
            prove_platform(index_path, platform, cache, say)
    seconds["emulated imports"] = round(time.monotonic() - begun, 1)
    manifests = {m["platform"]["architecture"]: m for m in checked["index"]["manifests"]}
    images = {
        p.oci: {
            "digest": manifests[p.debian]["digest"],
            "compressed_bytes": sum(layer.size for layer in r.layers),
            "unpacked_bytes": r.unpacked_bytes,
        }
        for p, r in results.items()
    }
    package_chart(version, digest, out / files.chart, tools["helm"], say)
    render_manifest(out / files.chart, out / files.manifest, tools["helm"])
    sbom.write(
        out / files.sbom,
        version,
        [(p, images[p.oci]["digest"]) for p in platforms],
        build.ZEROSCALER,
    )
    plugin_manifest = krew.write(version, out, {p.debian: a for p, a in commands.items()})
    begun = time.monotonic()
    packages = build_python_packages(out, say)
    seconds["wheel and sdist"] = round(time.monotonic() - begun, 1)
    seconds["total"] = round(time.monotonic() - started, 1)
    record = {
        "version": version,
        "index": {"digest": digest, "file": files.index, "tag": version},
        "images": images,
        "chart": {"file": files.chart, "image_digest": digest},
        "manifest": files.manifest,
        "sbom": files.sbom,
        "commands": {
            p.oci: {"file": a.name, "bytes": a.stat().st_size} for p, a in commands.items()
        },
        "krew": {"manifest": plugin_manifest},
        "python": packages,
        "seconds": seconds,
    }
    (out / "release.json").write_text(json.dumps(record, indent=2) + "\n")
    write_sums(out)
    return record


def prove_platform(index: Path, platform: Platform, cache: Path, say: Progress) -> None:
    """Start the platform's interpreter from the image's own files under qemu; it must import
    zeroscaler's commands and report the platform's machine."""
    emulator = debian.emulator(platform, cache, say)
    assert emulator is not None
    with tempfile.TemporaryDirectory(prefix=f"proof-{platform.debian}-", dir=cache) as tmp:
        root = Path(tmp) / "rootfs"
        unpack_platform(index, platform, root)
        code = f"import platform, {', '.join(PROOF_IMPORTS)}; print(platform.machine())"
        python = root / build.PYTHON.lstrip("/")
        # -L: the emulator looks up the loader and libraries under the image's root first; the
        # interpreter finds its standard library and site packages from its own path.
        cmd = [str(emulator), "-L", str(root), str(python), "-c", code]
        env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        if proc.returncode != 0 or proc.stdout.strip() != platform.machine:
            raise ReleaseError(
                f"{platform.oci}: the image's interpreter under {emulator.name} failed "
                f"(exit {proc.returncode}, printed {proc.stdout.strip()!r}): {proc.stderr[-1500:]}"
            )
    say(f"{platform.oci}: the image's python3.11 runs under {emulator.name} and imports zeroscaler")


def prove_command(
    archive: Path, platform: Platform, version: str, cache: Path, say: Progress
) -> None:
    """Unpack a command archive as a user would; it must say its version (under qemu if foreign)."""
    emulator = None if platform.native else debian.emulator(platform, cache, say)
    with tempfile.TemporaryDirectory(prefix=f"command-{platform.debian}-", dir=cache) as tmp:
        launcher = cli_bundle.unpack(archive, Path(tmp) / "cli")
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp}
        if emulator is not None:
            env["ZEROSCALER_EMULATOR"] = str(emulator)
        proc = subprocess.run(
            [str(launcher), "--version"], capture_output=True, text=True, env=env, timeout=300
        )
    if proc.returncode != 0 or proc.stdout.strip() != f"kubectl zeroscaler {version}":
        raise ReleaseError(
            f"{archive.name}: --version exited {proc.returncode}, printed "
            f"{proc.stdout.strip()!r}: {proc.stderr[-1500:]}"
        )
    how = "" if emulator is None else f" under {emulator.name}"
    say(f"{archive.name}: {archive.stat().st_size / 1e6:.1f} MB, runs{how}")


def build_python_packages(out: Path, say: Progress) -> dict[str, str]:
    """The wheel and the sdist, built from the checkout by `python -m build` (isolated)."""
    with tempfile.TemporaryDirectory(prefix="python-") as tmp:
        cmd = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", tmp]
        _run([*cmd, str(build.REPO)], "python -m build")
        made = sorted(Path(tmp).iterdir())
        wheels = [p for p in made if p.suffix == ".whl"]
        sdists = [p for p in made if p.name.endswith(".tar.gz")]
        if len(wheels) != 1 or len(sdists) != 1:
            raise ReleaseError(f"python -m build made {[p.name for p in made]}")
        for path in made:
            shutil.move(path, out / path.name)
    say(f"python packages: {wheels[0].name}, {sdists[0].name}")
    return {"wheel": wheels[0].name, "sdist": sdists[0].name}


def unpack_platform(index: Path, platform: Platform, root: Path) -> None:
    """Unpack the platform's layers from an index layout tar into root, in order."""
    with tarfile.open(index) as tar:

        def blob(digest: str) -> bytes:
            f = tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:"))
            assert f is not None
            return f.read()

        top = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        inner = json.loads(blob(top["manifests"][0]["digest"]))
        wanted = {"architecture": platform.debian, "os": "linux"}
        (descriptor,) = [
            m for m in inner["manifests"] if wanted.items() <= m.get("platform", {}).items()
        ]
        manifest = json.loads(blob(descriptor["digest"]))
        root.mkdir(parents=True)
        for layer in manifest["layers"]:
            path = root.parent / "layer.tar.gz"
            path.write_bytes(blob(layer["digest"]))
            subprocess.run(["tar", "-xzf", str(path), "-C", str(root)], check=True)
            path.unlink()


def package_chart(version: str, digest: str, out: Path, helm: Path, say: Progress) -> None:
    """`helm package` a copy of the chart whose image.digest is the release's index."""
    with tempfile.TemporaryDirectory(prefix="chart-") as tmp:
        copy = Path(tmp) / CHART.name
        shutil.copytree(CHART, copy)
        values = copy / "values.yaml"
        values.write_text(set_value(values.read_text(), "image", "digest", f'"{digest}"'))
        metadata = copy / "Chart.yaml"
        metadata.write_text(set_listed_image(metadata.read_text(), version, digest))
        _helm(helm, "lint", str(copy))
        _helm(
            helm,
            "package",
            str(copy),
            "--version",
            version,
            "--app-version",
            version,
            "--destination",
            tmp,
        )
        shutil.move(Path(tmp) / out.name, out)
    say(f"chart {out.name}: image.digest {digest}")


def set_value(text: str, section: str, key: str, value: str) -> str:
    """values.yaml with one key of a top-level section changed in place, comments kept."""
    block = re.search(rf"^{re.escape(section)}:\n((?:[ #].*\n|\n)*)", text, re.MULTILINE)
    if block is None:
        raise ReleaseError(f"values.yaml has no top-level {section}:")
    body, count = re.subn(
        rf"^(  {re.escape(key)}:) .*$", rf"\g<1> {value}", block.group(1), count=1, flags=re.M
    )
    if count != 1:
        raise ReleaseError(f"values.yaml has no {section}.{key}")
    edited = text[: block.start(1)] + body + text[block.end(1) :]
    loaded = yaml.safe_load(edited)[section][key]
    if str(loaded) != yaml.safe_load(value):
        raise ReleaseError(f"{section}.{key} reads back as {loaded!r}")
    return edited


def set_listed_image(text: str, version: str, digest: str) -> str:
    """Chart.yaml with the image Artifact Hub lists (`artifacthub.io/images`) made the release's:
    its version as the tag, pinned to the index's digest."""
    edited, count = re.subn(
        r"^(\s+image: [^\s:@]+):\S+$",
        rf"\g<1>:{version}@{digest}",
        text,
        count=1,
        flags=re.MULTILINE,
    )
    listed = yaml.safe_load(yaml.safe_load(edited)["annotations"]["artifacthub.io/images"])
    if count != 1 or not listed[0]["image"].endswith(f":{version}@{digest}"):
        raise ReleaseError("Chart.yaml's artifacthub.io/images names no image to pin")
    return edited


def render_manifest(chart: Path, out: Path, helm: Path) -> None:
    """The chart with its defaults as one file for `kubectl apply`, its Namespace first; hooks
    that only uninstall or test are left out."""
    rendered = _helm(
        helm, "template", "zeroscaler", str(chart), "--namespace", NAMESPACE, "--include-crds"
    )
    docs = [NAMESPACE_DOC]
    for doc in re.split(r"^---\s*$", rendered, flags=re.MULTILINE):
        body = yaml.safe_load(doc)
        if not body:
            continue
        hooks = body.get("metadata", {}).get("annotations", {}).get("helm.sh/hook", "")
        if hooks and set(hooks.replace(" ", "").split(",")) <= _NOT_APPLIED_HOOKS:
            continue
        docs.append(doc.strip() + "\n")
    out.write_text("---\n" + "---\n".join(docs))


NAMESPACE_DOC = f"""apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
"""


def write_sums(directory: Path) -> None:
    """SHA256SUMS in `sha256sum`'s format for every other file of the directory."""
    lines = []
    for path in sorted(directory.iterdir()):
        if path.is_file() and path.name != "SHA256SUMS":
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            lines.append(f"{digest.hexdigest()}  {path.name}\n")
    (directory / "SHA256SUMS").write_text("".join(lines))


def push(
    release: Path,
    registry: str,
    tools: Mapping[str, Path],
    say: Progress,
    *,
    plain_http: bool,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Push the index to REGISTRY/zeroscaler:VERSION and the chart to oci://REGISTRY/charts.

    Credentials are crane's and helm's own (`crane auth login`, `helm registry login`, or a
    Docker config); env, if given, is the tools' whole environment. Returns what was pushed.
    """
    record = json.loads((release / "release.json").read_text())
    check_sums(release)
    registry = registry.removeprefix("oci://").rstrip("/")
    version, digest = record["version"], record["index"]["digest"]
    image = f"{registry}/zeroscaler:{version}"
    with tempfile.TemporaryDirectory(prefix="push-") as tmp:
        layout = Path(tmp) / "layout"
        with tarfile.open(release / record["index"]["file"]) as tar:
            tar.extractall(layout, filter="data")
        flags = ["--insecure"] if plain_http else []
        crane = [str(tools["crane"]), "push", *flags, str(layout), image]
        pushed = _run(crane, "crane push", env)
    if not pushed.strip().endswith(digest):
        raise ReleaseError(f"crane pushed {pushed.strip()}, the release's index is {digest}")
    say(f"pushed {image}@{digest}")
    chart_repo = f"oci://{registry}/charts"
    flags = ["--plain-http"] if plain_http else []
    chart = str(release / record["chart"]["file"])
    _run([str(tools["helm"]), "push", chart, chart_repo, *flags], "helm push", env)
    say(f"pushed {chart_repo}/zeroscaler:{version}")
    return {"image": f"{image}@{digest}", "chart": f"{chart_repo}/zeroscaler", "version": version}


def check_sums(directory: Path) -> None:
    """Every file named in SHA256SUMS still has its sum."""
    for line in (directory / "SHA256SUMS").read_text().splitlines():
        want, _, name = line.partition("  ")
        got = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        if got != want:
            raise ReleaseError(f"{name}: its SHA-256 is not the one in SHA256SUMS")


def _helm(helm: Path, *args: str) -> str:
    return _run([str(helm), *args], f"helm {args[0]}")


def _run(cmd: list[str], what: str, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise ReleaseError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return proc.stdout
