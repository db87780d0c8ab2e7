"""Build (or find) the control-plane binaries from pinned Go module versions, cached by version.

kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from `k8s.io/kubernetes`
through a generated wrapper module that replaces each staging module with its published version;
etcd through a tiny main package of ours; kwok and helm with `go install`. Binaries found under
`KUBEBUILDER_ASSETS` (envtest's convention) are used instead of building them.
"""

from __future__ import annotations

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
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ALL_BINARIES = (*KUBE_BINARIES, "etcd", "kwok", "helm")
# kwok does nothing without Stage objects; we use the stage sets its module ships, unchanged.
KWOK_STAGES_FILE = "kwok-stages.yaml"
KWOK_STAGE_SETS = ("node/fast", "node/heartbeat-with-lease", "pod/fast")
ARTIFACTS = (*ALL_BINARIES, KWOK_STAGES_FILE)

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """The toolchain is missing or a build step failed."""


@dataclass(frozen=True, slots=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str
    helm: str
    go_minimum: str

    @property
    def key(self) -> str:
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}_helm-{self.helm}"


def load_versions() -> Versions:
    """The pinned versions from versions.toml."""
    text = resources.files("localcluster").joinpath("versions.toml").read_text()
    data = tomllib.loads(text)
    return Versions(**{k: str(data[k]) for k in Versions.__dataclass_fields__})


def cache_root() -> Path:
    """Where built binaries and build sources live, outside the repository."""
    if env := os.environ.get("ZEROSCALER_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zeroscaler"


def bin_dir(versions: Versions) -> Path:
    return cache_root() / "controlplane" / versions.key / "bin"


def find_binaries(versions: Versions) -> dict[str, Path]:
    """The binaries already present: KUBEBUILDER_ASSETS first, then our cache."""
    found: dict[str, Path] = {}
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
    versions: Versions | None = None, progress: Progress | None = None
) -> dict[str, Path]:
    """Every control-plane binary, building the missing ones; returns name → path."""
    versions = versions or load_versions()
    say = progress or _stderr
    found = find_binaries(versions)
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
        step("kwok", lambda: _go_install(go, kwok, out, "kwok", say, ldflags=""))
    if KWOK_STAGES_FILE in missing:
        step("kwok-stages", lambda: _write_kwok_stages(go, versions, out / KWOK_STAGES_FILE))
    if "helm" in missing:
        helm = f"helm.sh/helm/v3/cmd/helm@v{versions.helm}"
        flags = _helm_ldflags(versions)
        step("helm", lambda: _go_install(go, helm, out, "helm", say, ldflags=flags))
    say(f"control plane ready in {_elapsed(started)}")
    _record_timings(out.parent / "build-times.json", timings)
    found = find_binaries(versions)
    still = [name for name in ARTIFACTS if name not in found]
    if still:
        raise BuildError(f"built, but these binaries are still missing: {', '.join(still)}")
    return found


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


def _build_kubernetes(go: str, v: Versions, out: Path, names: list[str], say: Progress) -> None:
    src = cache_root() / "src" / f"kubernetes-{v.kubernetes}"
    src.mkdir(parents=True, exist_ok=True)
    say(f"kubernetes {v.kubernetes}: resolving the release's go.mod")
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
        f"kubernetes {v.kubernetes}",
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
    go: str, target: str, out: Path, label: str, say: Progress, *, ldflags: str
) -> None:
    cwd = cache_root() / "src"
    cwd.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    cmd = [go, "install", "-v", "-trimpath", f"-ldflags=-s -w {ldflags}", target]
    _stream(cmd, cwd, _go_env({"GOBIN": str(out), "GOFLAGS": ""}), label, say)
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
    _stream([*cmd, *packages], src, _go_env(), label, say)
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
