"""Give freed heap memory back to the operating system after bursts (big lists, relists)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim = _libc.malloc_trim
except (OSError, AttributeError):  # not glibc: nothing to trim
    _trim = None


def release_free_memory() -> None:
    """Collect garbage, then ask glibc to return free pages (RSS otherwise keeps its peak)."""
    gc.collect()
    if _trim is not None:
        _trim(0)
