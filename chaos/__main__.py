"""`python -m chaos [SCENARIO...] [--short] [--soak WORKLOADS TYPES MINUTES]`: `make chaos`."""

from __future__ import annotations

import sys

from chaos.scenarios import main

if __name__ == "__main__":
    sys.exit(main())
