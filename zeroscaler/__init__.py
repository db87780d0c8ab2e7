"""zeroscaler: scale idle Kubernetes operators to zero and wake them on the first change."""

import sys

# httpx imports its command-line tool when it can, and with it click, rich and pygments: megabytes
# resident that no zeroscaler process uses. A None entry makes that optional import fail quietly.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
