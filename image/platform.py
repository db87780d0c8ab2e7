"""The architectures the image is built for, and how each tool names them."""

from __future__ import annotations

import platform as _host
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Platform:
    """One Linux architecture, in Debian's, the kernel's and OCI's names."""

    debian: str  # Debian's architecture name: amd64, arm64
    machine: str  # the kernel's (uname -m) and the wheels' platform tags: x86_64, aarch64
    variant: str = ""  # OCI's CPU variant: v8 for arm64

    @property
    def triplet(self) -> str:
        """Debian's multiarch directory name, under /usr/lib."""
        return f"{self.machine}-linux-gnu"

    @property
    def oci(self) -> str:
        """os/architecture[/variant], as `--platform` flags and image indexes write it."""
        return "/".join(p for p in ("linux", self.debian, self.variant) if p)

    @property
    def native(self) -> bool:
        """Whether this machine runs its binaries without an emulator."""
        return _host.machine() == self.machine


AMD64 = Platform("amd64", "x86_64")
ARM64 = Platform("arm64", "aarch64", "v8")
PLATFORMS = {p.debian: p for p in (AMD64, ARM64)}
