"""Build (or find) the control-plane binaries and the real node's parts from pinned versions.

kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from `k8s.io/kubernetes`
through a generated wrapper module that replaces each staging module with its published version;
etcd through a tiny main package of ours; kwok with `go install`. Binaries found under
`KUBEBUILDER_ASSETS` (envtest's convention) are used instead of building them. Helm 3 (`helm`, the
one everything uses) and Helm 4 (`helm4`, for the tests that run both) are tools, not part of the
control plane: each is built with `go install` into a directory of its own, like crane.

The real node's parts: the kubelet from the same wrapper module; containerd, ctr and the runc shim
with `go install`; runc and the CNI plugins from Debian packages (`apt-get download` and
`dpkg-deb -x` into the cache, never installed system-wide); the pause image from a C program of ours
(`gcc -static`) and a test image from Debian's static busybox, both written by `oci.archive`.

`ZEROSCALER_KUBERNETES=X.Y.Z` builds and runs another Kubernetes release than the pinned one (the
compatibility run); everything else stays as pinned.

Cache layout under the cache root: `controlplane/<Versions.key>/bin` holds the control-plane
binaries, keyed by the three control-plane versions only, so pinning node parts or a helm leaves a
built control plane valid. Each node part has a directory `node/<part>-<version>/` of its own and
each tool one in `tools/<tool>-<version>/`, filled in a scratch directory and renamed into place
when complete, so changing one version rebuilds only that part or tool.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from oci import archive

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ALL_BINARIES = (*KUBE_BINARIES, "etcd", "kwok")
# Helm 3 is `helm`, the default of every caller; Helm 4 is `helm4`, beside it.
HELM_BINARIES = ("helm", "helm4")
# kwok does nothing without Stage objects; we use the stage sets its module ships, unchanged.
KWOK_STAGES_FILE = "kwok-stages.yaml"
KWOK_STAGE_SETS = ("node/fast", "node/heartbeat-with-lease", "pod/fast")
ARTIFACTS = (*ALL_BINARIES, KWOK_STAGES_FILE)
CONTAINERD_COMMANDS = ("containerd", "ctr", "containerd-shim-runc-v2")
CONTAINERD_TAGS = "no_btrfs,osusergo,netgo"
# Image names of our own: no registry serves them, each real node imports them from archives.
PAUSE_IMAGE = "zeroscaler.local/pause:1"
BUSYBOX_IMAGE = "zeroscaler.local/busybox:1"
# Another Kubernetes release than the pinned one, for the compatibility run (`make compat`).
KUBERNETES_ENV = "ZEROSCALER_KUBERNETES"

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """The toolchain is missing or a build step failed."""


@dataclass(frozen=True, slots=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str
    helm: str
    helm4: str
    go_minimum: str
    containerd: str
    runc: str
    cni_plugins: str
    busybox: str
    crane: str
    distribution: str
    prometheus: str

    @property
    def key(self) -> str:
        """The control plane's cache directory name; node parts are keyed one by one."""
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}"


def load_versions() -> Versions:
    """The pinned versions from versions.toml, with Kubernetes from ZEROSCALER_KUBERNETES if set."""
    text = resources.files("localcluster").joinpath("versions.toml").read_text()
    data = tomllib.loads(text)
    pinned = Versions(**{k: str(data[k]) for k in Versions.__dataclass_fields__})
    override = os.environ.get(KUBERNETES_ENV, "").strip()
    return with_kubernetes(pinned, override) if override else pinned


def with_kubernetes(versions: Versions, release: str) -> Versions:
    """The same versions with another Kubernetes release (X.Y.Z, as the Go module tags it)."""
    bare = release.removeprefix("v")
    if not re.fullmatch(r"1\.\d+\.\d+", bare):
        raise BuildError(
            f"{KUBERNETES_ENV}={release!r} is not a Kubernetes release; use X.Y.Z, e.g. 1.34.4"
        )
    return replace(versions, kubernetes=bare)


def cache_root() -> Path:
    """Where built binaries and build sources live, outside the repository."""
    if env := os.environ.get("ZEROSCALER_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zeroscaler"


def bin_dir(versions: Versions) -> Path:
    return cache_root() / "controlplane" / versions.key / "bin"


def find_binaries(versions: Versions) -> dict[str, Path]:
    """The binaries already present: KUBEBUILDER_ASSETS first, then our cache (helms included)."""
    found: dict[str, Path] = {}
    for part in _helm_parts(versions, _stderr):
        found.update(_part_files(part, tools_root()) or {})
    places = [Path(p) for p in [os.environ.get("KUBEBUILDER_ASSETS", "")] if p]
    places.append(bin_dir(versions))
    for name in ARTIFACTS:
        for place in places:
            candidate = place / name
            runnable = name.endswith(".yaml") or os.access(candidate, os.X_OK)
            if candidate.is_file() and runnable:
                found[name] = candidate
                break
    return found


def ensure_binaries(
    versions: Versions | None = None, progress: Progress | None = None, *, node: bool = False
) -> dict[str, Path]:
    """Every control-plane binary (and with `node`, the real node's parts); returns name → path.

    A node part that cannot be built here leaves the node out, saying why, unless CI=true.
    """
    versions = versions or load_versions()
    say = progress or _stderr
    found = _ensure_control_plane(versions, say)
    found.update(ensure_helms(versions, say))
    if node:
        try:
            found.update(ensure_node_parts(versions, say))
        except BuildError as e:
            if os.environ.get("CI") == "true":
                raise
            say(f"real node: cannot be built here, clusters get kwok nodes only: {e}")
    return found


def _ensure_control_plane(versions: Versions, say: Progress) -> dict[str, Path]:
    found = {k: v for k, v in find_binaries(versions).items() if k in ARTIFACTS}
    missing = [name for name in ARTIFACTS if name not in found]
    if not missing:
        return found
    go = _check_go(versions.go_minimum)
    out = bin_dir(versions)
    out.mkdir(parents=True, exist_ok=True)
    say(f"building {', '.join(missing)} into {out} (a cold build takes 25-40 minutes on 2 cores)")
    started = time.monotonic()
    timings: dict[str, float] = {}

    def step(label: str, action: Callable[[], None]) -> None:
        begun = time.monotonic()
        action()
        timings[label] = round(time.monotonic() - begun, 1)

    kube_missing = [n for n in KUBE_BINARIES if n in missing]
    if kube_missing:
        step("kubernetes", lambda: _build_kubernetes(go, versions, out, kube_missing, say))
    if "etcd" in missing:
        step("etcd", lambda: _build_etcd(go, versions, out, say))
    if "kwok" in missing:
        kwok = f"sigs.k8s.io/kwok/cmd/kwok@v{versions.kwok}"
        step("kwok", lambda: _go_install(go, [kwok], out, "kwok", say, ldflags=""))
    if KWOK_STAGES_FILE in missing:
        step("kwok-stages", lambda: _write_kwok_stages(go, versions, out / KWOK_STAGES_FILE))
    say(f"control plane ready in {_elapsed(started)}")
    _record_timings(out.parent / "build-times.json", timings)
    found = {k: v for k, v in find_binaries(versions).items() if k in ARTIFACTS}
    still = [name for name in ARTIFACTS if name not in found]
    if still:
        raise BuildError(f"built, but these binaries are still missing: {', '.join(still)}")
    return found


@dataclass(frozen=True, slots=True)
class _Part:
    """One node part: its cache directory, the artifacts in it, and how to fill a scratch copy."""

    directory: str
    files: dict[str, str]  # artifact name -> path inside the directory
    fill: Callable[[Path], None]


def node_root() -> Path:
    return cache_root() / "node"


def ensure_node_parts(
    versions: Versions | None = None, progress: Progress | None = None
) -> dict[str, Path]:
    """The real node's parts, building or fetching the missing ones; returns name -> path."""
    v = versions or load_versions()
    say = progress or _stderr
    parts = _node_parts(v, say)
    missing = [p for p in parts if _part_files(p) is None]
    if missing:
        say(f"real node: preparing {', '.join(p.directory for p in missing)} in {node_root()}")
        started = time.monotonic()
        for part in missing:
            began = time.monotonic()
            _fill_part(part)
            seconds = round(time.monotonic() - began, 1)
            _record_timings(node_root() / "build-times.json", {part.directory: seconds})
        say(f"real node parts ready in {_elapsed(started)}")
    found: dict[str, Path] = {}
    for part in parts:
        files = _part_files(part)
        if files is None:
            raise BuildError(f"{part.directory}: prepared, but its files are still missing")
        found.update(files)
    return found


def ensure_helm(versions: Versions | None = None, progress: Progress | None = None) -> Path:
    """Helm 3 alone (a release needs no control plane): found, or built into its tools directory."""
    return ensure_helms(versions, progress)["helm"]


def ensure_helms(
    versions: Versions | None = None, progress: Progress | None = None
) -> dict[str, Path]:
    """`helm` (Helm 3) and `helm4` (Helm 4), each built once from its Go module."""
    v = versions or load_versions()
    say = progress or _stderr
    found: dict[str, Path] = {}
    for part in _helm_parts(v, say):
        if _part_files(part, tools_root()) is None:
            say(f"helm: building {part.directory} into {tools_root()}")
            began = time.monotonic()
            _fill_part(part, tools_root())
            seconds = round(time.monotonic() - began, 1)
            _record_timings(tools_root() / "build-times.json", {part.directory: seconds})
        files = _part_files(part, tools_root())
        if files is None:
            raise BuildError(f"{part.directory}: built, but its files are still missing")
        found.update(files)
    return found


def _helm_parts(v: Versions, say: Progress) -> list[_Part]:
    def helm3(out: Path) -> None:
        target = f"helm.sh/helm/v3/cmd/helm@v{v.helm}"
        label = f"helm {v.helm}"
        _go_install(_check_go(v.go_minimum), [target], out, label, say, ldflags=_helm_ldflags(v))

    def helm4(out: Path) -> None:
        # Helm 4 takes its default Kubernetes version from the client-go it was built with.
        target = f"helm.sh/helm/v4/cmd/helm@v{v.helm4}"
        flags = f"-X helm.sh/helm/v4/internal/version.version=v{v.helm4}"
        _go_install(_check_go(v.go_minimum), [target], out, f"helm4 {v.helm4}", say, ldflags=flags)
        (out / "helm").rename(out / "helm4")

    return [
        _Part(f"helm-{v.helm}", {"helm": "helm"}, helm3),
        _Part(f"helm-{v.helm4}", {"helm4": "helm4"}, helm4),
    ]


def tools_root() -> Path:
    return cache_root() / "tools"


def ensure_release_tools(
    versions: Versions | None = None, progress: Progress | None = None
) -> dict[str, Path]:
    """crane (pushes image indexes) and the distribution registry, built once from their modules."""
    v = versions or load_versions()
    say = progress or _stderr

    def install(target: str, flags: str, label: str) -> Callable[[Path], None]:
        return lambda out: _go_install(
            _check_go(v.go_minimum), [target], out, label, say, ldflags=flags
        )

    crane_pkg = "github.com/google/go-containerregistry/cmd/crane"
    registry_mod = "github.com/distribution/distribution/v3"
    parts = [
        _Part(
            f"crane-{v.crane}",
            {"crane": "crane"},
            install(f"{crane_pkg}@v{v.crane}", "", f"crane {v.crane}"),
        ),
        _Part(
            f"registry-{v.distribution}",
            {"registry": "registry"},
            install(
                f"{registry_mod}/cmd/registry@v{v.distribution}",
                f"-X {registry_mod}/version.version=v{v.distribution}",
                f"registry {v.distribution}",
            ),
        ),
    ]
    found: dict[str, Path] = {}
    for part in parts:
        if _part_files(part, tools_root()) is None:
            say(f"release tools: building {part.directory} into {tools_root()}")
            _fill_part(part, tools_root())
        files = _part_files(part, tools_root())
        if files is None:
            raise BuildError(f"{part.directory}: built, but its files are still missing")
        found.update(files)
    return found


# The example Go operators (examples/widget-operator, examples/cert-manager): static binaries
# built from their committed go.mod and go.sum, cached by the hash of their sources, so the image
# build finds them ready.
WIDGET_OPERATOR = "widget-operator"
CERT_MANAGER = "cert-manager"
# The CRDs cert-manager's controllers need, copied from its module beside its binary (the tests
# install them as its users would; nothing is fetched inside the loopback-only namespace).
CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"
CERT_MANAGER_CRDS = (
    "cert-manager.io_certificates.yaml",
    "cert-manager.io_certificaterequests.yaml",
    "cert-manager.io_issuers.yaml",
    "cert-manager.io_clusterissuers.yaml",
)


def examples_root() -> Path:
    return cache_root() / "examples"


def example_sources(name: str) -> Path:
    return Path(__file__).resolve().parents[1] / "examples" / name


def widget_operator_sources() -> Path:
    return example_sources(WIDGET_OPERATOR)


def ensure_widget_operator(
    versions: Versions | None = None, progress: Progress | None = None
) -> Path:
    """The example operator's binary: found in the cache, else built (the Go module proxy may be
    asked for modules the module cache lacks, so this runs outside the loopback-only namespace)."""
    return _ensure_example(WIDGET_OPERATOR, versions, progress)[WIDGET_OPERATOR]


def ensure_cert_manager(
    versions: Versions | None = None, progress: Progress | None = None
) -> dict[str, Path]:
    """cert-manager's certificate controllers wired by our main (examples/cert-manager), and the
    CRDs they need from the same module version; name -> path."""
    return _ensure_example(CERT_MANAGER, versions, progress, extra=_cert_manager_crds)


def _cert_manager_crds(go: str, work: Path, out: Path) -> dict[str, str]:
    """Copy cert-manager's CRDs from the module the build used into the part."""
    required = required_version((work / "go.mod").read_text(), CERT_MANAGER_MODULE)
    if required is None:
        raise BuildError(f"examples/{CERT_MANAGER}/go.mod does not require {CERT_MANAGER_MODULE}")
    info = _run_json([go, "mod", "download", "-json", f"{CERT_MANAGER_MODULE}@{required}"], work)
    crds = Path(info["Dir"]) / "deploy" / "crds"
    files = {}
    for name in CERT_MANAGER_CRDS:
        shutil.copyfile(crds / name, out / name)
        files[name] = name
    return files


FLUX_APPLY = "flux-apply"


def ensure_flux_apply(versions: Versions | None = None, progress: Progress | None = None) -> Path:
    """Flux's drift correction as a command (localcluster/go/flux-apply): Flux's own server-side
    apply library, `github.com/fluxcd/pkg/ssa`, applying a file as kustomize-controller does."""
    src = Path(__file__).resolve().parent / "go" / FLUX_APPLY
    return _ensure_example(FLUX_APPLY, versions, progress, src=src)[FLUX_APPLY]


PROMQL_CHECK = "promql-check"
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"


def ensure_promql_check(versions: Versions | None = None, progress: Progress | None = None) -> Path:
    """The chart tests' rules checker (localcluster/go/promql-check): Prometheus's own rules-file
    reader and PromQL parser at the pinned version, without the rest of Prometheus."""
    v = versions or load_versions()
    src = Path(__file__).resolve().parent / "go" / PROMQL_CHECK
    required = required_version((src / "go.mod").read_text(), PROMETHEUS_MODULE)
    if required != f"v{v.prometheus}":
        has = f"requires {PROMETHEUS_MODULE} {required}" if required else "requires no Prometheus"
        raise BuildError(
            f"localcluster/go/{PROMQL_CHECK}/go.mod {has}, but versions.toml pins "
            f"prometheus = {v.prometheus!r}: in that directory run "
            f"`go get {PROMETHEUS_MODULE}@v{v.prometheus}` and `go mod tidy`"
        )
    return _ensure_example(PROMQL_CHECK, v, progress, src=src)[PROMQL_CHECK]


def required_version(go_mod: str, module: str) -> str | None:
    """The version a go.mod requires of a module (either require form), or None."""
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.M)
    return found[1] if found else None


def _ensure_example(
    name: str,
    versions: Versions | None,
    progress: Progress | None,
    extra: Callable[[str, Path, Path], dict[str, str]] | None = None,
    src: Path | None = None,
) -> dict[str, Path]:
    v = versions or load_versions()
    say = progress or _stderr
    src = src or example_sources(name)
    files = sorted(f for f in src.iterdir() if f.name in ("go.mod", "go.sum") or f.suffix == ".go")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    artifacts = {name: name}
    if extra is not None:
        artifacts.update({crd: crd for crd in CERT_MANAGER_CRDS})

    def fill(out: Path) -> None:
        go = _check_go(v.go_minimum)
        work = cache_root() / "src" / name
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        for f in files:
            shutil.copyfile(f, work / f.name)
        # -mod=readonly: the committed go.sum is the pin; a build never rewrites it.
        _go_build(go, work, ["."], out / name, "-s -w", name, say,
                  env={"GOFLAGS": "-mod=readonly"})  # fmt: skip
        if extra is not None:
            extra(go, work, out)

    part = _Part(f"{name}-{digest.hexdigest()[:12]}", artifacts, fill)
    if (found := _part_files(part, examples_root())) is None:
        say(f"{name}: building into {examples_root()}")
        began = time.monotonic()
        _fill_part(part, examples_root())
        seconds = round(time.monotonic() - began, 1)
        _record_timings(examples_root() / "build-times.json", {name: seconds})
        found = _part_files(part, examples_root())
    if found is None:
        raise BuildError(f"{part.directory}: built, but its files are missing")
    return found


def read_node_timings() -> dict[str, object]:
    """The recorded durations of the node parts built here, by part directory."""
    path = node_root() / "build-times.json"
    result: dict[str, object] = json.loads(path.read_text()) if path.exists() else {}
    return result


def _node_parts(v: Versions, say: Progress) -> list[_Part]:
    pause_src = resources.files("localcluster").joinpath("c/pause.c").read_bytes()
    pause_hash = hashlib.sha256(pause_src).hexdigest()[:12]
    containerd = [
        f"github.com/containerd/containerd/v2/cmd/{c}@v{v.containerd}" for c in CONTAINERD_COMMANDS
    ]
    containerd_flags = f"-X github.com/containerd/containerd/v2/version.Version=v{v.containerd}"

    def kubelet(out: Path) -> None:
        go = _check_go(v.go_minimum)
        _build_kubernetes(go, v, out / "kubelet", ["kubelet"], say, label="kubelet")

    def containerd_commands(out: Path) -> None:
        go = _check_go(v.go_minimum)
        label = f"containerd {v.containerd}"
        _go_install(go, containerd, out, label, say, ldflags=containerd_flags, tags=CONTAINERD_TAGS)

    return [
        _Part(f"kubelet-{v.kubernetes}", {"kubelet": "kubelet"}, kubelet),
        _Part(
            f"containerd-{v.containerd}",
            {c: c for c in CONTAINERD_COMMANDS},
            containerd_commands,
        ),
        _Part(
            _part_name("runc", v.runc),
            {"runc": "root/usr/sbin/runc"},
            lambda out: _debian_unpack("runc", v.runc, out / "root", say),
        ),
        _Part(
            _part_name("cni-plugins", v.cni_plugins),
            {"cni-loopback": "root/usr/lib/cni/loopback"},
            lambda out: _debian_unpack(
                "containernetworking-plugins", v.cni_plugins, out / "root", say
            ),
        ),
        _Part(
            f"pause-{pause_hash}",
            {"pause": "pause", "pause.tar": "pause.tar"},
            lambda out: _build_pause(pause_src, out, say),
        ),
        _Part(
            _part_name("busybox", v.busybox),
            {"busybox.tar": "busybox.tar"},
            lambda out: _build_busybox_image(v.busybox, out, say),
        ),
    ]


def _part_name(stem: str, debian_version: str) -> str:
    return f"{stem}-{debian_version.replace(':', '_')}"  # an epoch's colon is awkward in paths


def _part_files(part: _Part, root: Path | None = None) -> dict[str, Path] | None:
    base = (root or node_root()) / part.directory
    files = {name: base / rel for name, rel in part.files.items()}
    return files if all(f.is_file() for f in files.values()) else None


def _fill_part(part: _Part, root: Path | None = None) -> None:
    """Fill the part in a scratch directory and move it into place only once complete."""
    final = (root or node_root()) / part.directory
    scratch = (root or node_root()) / f".{part.directory}.partial"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    part.fill(scratch)
    absent = [rel for rel in part.files.values() if not (scratch / rel).is_file()]
    if absent:
        raise BuildError(f"{part.directory}: the build made no {', '.join(absent)}")
    shutil.rmtree(final, ignore_errors=True)
    scratch.rename(final)


def _debian_unpack(package: str, version: str, dest: Path, say: Progress) -> None:
    deb = _debian_package(package, version, say)
    dpkg_deb = shutil.which("dpkg-deb")
    if dpkg_deb is None:
        raise BuildError(f"{package}: dpkg-deb is needed to unpack {deb.name}")
    _check([dpkg_deb, "-x", str(deb), str(dest)], f"unpacking {deb.name}")


def _debian_package(package: str, version: str, say: Progress) -> Path:
    """The package file from the cache, else from `apt-get download` (refreshing the lists once)."""
    debs = cache_root() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    pattern = f"{package}_{glob.escape(version.replace(':', '%3a'))}_*.deb"
    if found := sorted(debs.glob(pattern)):
        return found[0]
    apt = shutil.which("apt-get")
    if apt is None:
        raise BuildError(f"{package} {version}: apt-get is needed to fetch it (a Debian system)")
    say(f"{package} {version}: apt-get download")
    cmd = [apt, "download", "-q", f"{package}={version}"]
    first = subprocess.run(cmd, cwd=debs, capture_output=True, text=True)
    if first.returncode != 0:
        # A fresh machine may have no package lists yet: fetch them, then try once more.
        if os.geteuid() != 0:
            raise BuildError(
                f"`apt-get download {package}={version}` failed and refreshing the package lists "
                f"needs root (run `apt-get update` once): {first.stderr.strip()[-500:]}"
            )
        say(f"{package} {version}: not in the package lists; apt-get update")
        _check([apt, "update", "-q"], "apt-get update")
        _check(cmd, f"apt-get download {package}={version}", cwd=debs)
    if found := sorted(debs.glob(pattern)):
        return found[0]
    raise BuildError(f"apt-get download {package}={version} wrote no {pattern} in {debs}")


def _build_pause(source: bytes, out: Path, say: Progress) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        raise BuildError("the pause image needs gcc with static libc (Debian: gcc, libc6-dev)")
    say("pause: gcc -static")
    (out / "pause.c").write_bytes(source)
    _check([gcc, "-static", "-Os", "-s", "-o", str(out / "pause"), str(out / "pause.c")], "gcc")
    pause = archive.Entry("/pause", 0o755, data=(out / "pause").read_bytes())
    built = archive.Image(
        [archive.make_layer([pause], "pause")], [PAUSE_IMAGE], entrypoint=["/pause"]
    )
    archive.write_archive(built, out / "pause.tar")


def _build_busybox_image(version: str, out: Path, say: Progress) -> None:
    root = out / "root"
    _debian_unpack("busybox-static", version, root, say)
    busybox = root / "bin" / "busybox"
    applets = _check([str(busybox), "--list"], "busybox --list").split()
    entries = [
        archive.Entry("/bin", 0o755, "dir"),
        archive.Entry("/tmp", 0o1777, "dir"),
        archive.Entry("/bin/busybox", 0o755, data=busybox.read_bytes()),
        *(
            archive.Entry(f"/bin/{a}", 0o777, "symlink", target="busybox")
            for a in applets
            if a != "busybox"
        ),
    ]
    layer = archive.make_layer(entries, f"busybox-static {version}")
    built = archive.Image([layer], [BUSYBOX_IMAGE], cmd=["sh"], env=["PATH=/bin"])
    archive.write_archive(built, out / "busybox.tar")
    shutil.rmtree(root)


def _check(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def _helm_ldflags(v: Versions) -> str:
    major, minor = v.kubernetes.split(".")[:2]
    flags = [f"-X helm.sh/helm/v3/internal/version.version=v{v.helm}"]
    for pkg in ("lint/rules", "chartutil"):  # helm's default Kubernetes version for lint/template
        flags += [
            f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersionMajor={major}",
            f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersionMinor={minor}",
        ]
    return " ".join(flags)


def _record_timings(path: Path, timings: dict[str, float]) -> None:
    """Keep how long each build step took, for the benchmark report; a partial build merges in."""
    old = json.loads(path.read_text()) if path.exists() else {}
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest compiler/linker
    recorded = {
        "seconds": {**old.get("seconds", {}), **timings},
        "peak_child_rss_mb": max(round(peak_kb / 1024), old.get("peak_child_rss_mb", 0)),
        "cores": os.cpu_count(),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    path.write_text(json.dumps(recorded, indent=2) + "\n")


def read_timings(versions: Versions | None = None) -> dict[str, object]:
    """The recorded build-step durations for these versions, if a build here recorded them."""
    path = bin_dir(versions or load_versions()).parent / "build-times.json"
    result: dict[str, object] = json.loads(path.read_text()) if path.exists() else {}
    return result


def _check_go(minimum: str) -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            f"Go {minimum} or newer is needed to build the local control plane; none is on "
            "PATH: install Go, or point KUBEBUILDER_ASSETS at prebuilt binaries"
        )
    raw = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout
    have = _version_tuple(raw.strip().removeprefix("go"))
    if have < _version_tuple(minimum):
        raise BuildError(f"Go {minimum} or newer is needed; {go} is {raw.strip()}")
    return go


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])


def _go_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    # GOTOOLCHAIN=local: never fetch another toolchain behind the user's back; fail clearly instead.
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    env.pop("GOWORK", None)
    return {**env, **(extra or {})}


def _build_kubernetes(
    go: str, v: Versions, out: Path, names: list[str], say: Progress, label: str = "kubernetes"
) -> None:
    src = cache_root() / "src" / f"kubernetes-{v.kubernetes}"
    src.mkdir(parents=True, exist_ok=True)
    say(f"{label} {v.kubernetes}: resolving the release's go.mod")
    info = _run_json([go, "mod", "download", "-json", f"k8s.io/kubernetes@v{v.kubernetes}"], src)
    release_mod = Path(info["GoMod"]).read_text()
    (src / "go.mod").write_text(wrapper_go_mod(release_mod, v.kubernetes))
    major, minor = v.kubernetes.split(".")[:2]
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    flags = {
        "gitVersion": f"v{v.kubernetes}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": stamp,
    }
    ldflags = " ".join(
        f"-X {pkg}.{k}={val}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for k, val in flags.items()
    )
    packages = [f"k8s.io/kubernetes/cmd/{n}" for n in names]
    _go_build(
        go,
        src,
        packages,
        out,
        f"-s -w {ldflags}",
        f"{label} {v.kubernetes}",
        say,
        tags="selinux,notest",
    )


def wrapper_go_mod(release_go_mod: str, kube_version: str) -> str:
    """A go.mod that builds the release's commands with each staging module at its published tag."""
    staging = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", release_go_mod, re.M)
    if not staging:
        raise BuildError("the release go.mod lists no staging replacements; unexpected layout")
    keep = [
        line for line in release_go_mod.splitlines() if re.match(r"^(go|godebug|toolchain)\s", line)
    ]
    staging_tag = "v0." + kube_version.split(".", 1)[1]
    lines = [
        "module zeroscaler.local/controlplane",
        "",
        *keep,
        "",
        f"require k8s.io/kubernetes v{kube_version}",
        "",
    ]
    lines += [f"replace {m} => {m} {staging_tag}" for m in sorted(set(staging))]
    return "\n".join(lines) + "\n"


def _build_etcd(go: str, v: Versions, out: Path, say: Progress) -> None:
    src = cache_root() / "src" / f"etcd-{v.etcd}"
    src.mkdir(parents=True, exist_ok=True)
    main = resources.files("localcluster").joinpath("go/etcd/main.go").read_text()
    (src / "main.go").write_text(main)
    (src / "go.mod").write_text(f"module zeroscaler.local/etcd\n\ngo {v.go_minimum}\n")
    say(f"etcd {v.etcd}: resolving modules")
    _run([go, "get", f"go.etcd.io/etcd/server/v3@v{v.etcd}"], src)
    _run([go, "mod", "tidy"], src)
    _go_build(go, src, ["."], out / "etcd", "-s -w", f"etcd {v.etcd}", say)


def _write_kwok_stages(go: str, v: Versions, out: Path) -> None:
    cwd = cache_root() / "src"
    cwd.mkdir(parents=True, exist_ok=True)
    info = _run_json([go, "mod", "download", "-json", f"sigs.k8s.io/kwok@v{v.kwok}"], cwd)
    root = Path(info["Dir"]) / "kustomize" / "stage"
    docs = []
    for stage_set in KWOK_STAGE_SETS:
        kustomization = (root / stage_set / "kustomization.yaml").read_text()
        for name in re.findall(r"^- (\S+\.yaml)$", kustomization, re.M):
            docs.append((root / stage_set / name).read_text().strip())
    if not docs:
        raise BuildError(f"kwok {v.kwok} ships no stages under {root}")
    out.write_text("\n---\n".join(docs) + "\n")


def _go_install(
    go: str,
    targets: list[str],
    out: Path,
    label: str,
    say: Progress,
    *,
    ldflags: str,
    tags: str = "",
) -> None:
    cwd = cache_root() / "src"
    cwd.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    cmd = [go, "install", "-v", "-trimpath", f"-ldflags=-s -w {ldflags}"]
    if tags:
        cmd.append(f"-tags={tags}")
    _stream([*cmd, *targets], cwd, _go_env({"GOBIN": str(out), "GOFLAGS": ""}), label, say)
    say(f"{label}: built in {_elapsed(started)}")


def _go_build(
    go: str,
    src: Path,
    packages: list[str],
    out: Path,
    ldflags: str,
    label: str,
    say: Progress,
    tags: str = "",
    env: dict[str, str] | None = None,
) -> None:
    started = time.monotonic()
    cmd = [
        go,
        "build",
        "-v",
        "-trimpath",
        f"-ldflags={ldflags}",
        "-o",
        f"{out}{os.sep}" if len(packages) > 1 else str(out),
    ]
    if tags:
        cmd.append(f"-tags={tags}")
    _stream([*cmd, *packages], src, _go_env(env), label, say)
    say(f"{label}: built in {_elapsed(started)}")


def _stream(cmd: list[str], cwd: Path, env: dict[str, str], label: str, say: Progress) -> None:
    """Run a Go command, reporting every 20 s how many packages it compiled."""
    log_path = cwd / f"build-{label.split()[0]}.log"
    compiled = 0
    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not done.wait(20):
            say(f"{label}: {compiled} packages compiled, {_elapsed(started)}")

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    with (
        log_path.open("w") as log,
        subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if not line.startswith("go: "):
                compiled += 1
        code = proc.wait()
    done.set()
    if code != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
        raise BuildError(
            f"{label}: `{' '.join(cmd[:3])} ...` failed (exit {code}); log {log_path}:\n{tail}"
        )


def _run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=_go_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def _run_json(cmd: list[str], cwd: Path) -> dict[str, str]:
    result: dict[str, str] = json.loads(_run(cmd, cwd))
    return result


def _elapsed(started: float) -> str:
    seconds = int(time.monotonic() - started)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _stderr(message: str) -> None:
    print(f"[controlplane] {message}", file=sys.stderr, flush=True)
