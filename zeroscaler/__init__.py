"""zeroscaler: scale idle Kubernetes operators to zero and wake them on the first change."""

import sys

# The name on the package index (`pip install kube-zeroscaler`); `zeroscaler` there is another
# project's. The import package and the commands keep the name zeroscaler.
DISTRIBUTION = "kube-zeroscaler"

# httpx imports its command-line tool when it can, and with it click, rich and pygments: megabytes
# resident that no zeroscaler process uses. A None entry makes that optional import fail quietly.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
