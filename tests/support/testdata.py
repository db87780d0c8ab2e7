"""Where the real operators' manifests are: `shared/testdata/operators` beside the repository."""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULT = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "operators"


def operators_dir() -> Path:
    """The testdata folder (`ZEROSCALER_TESTDATA` overrides); a clear error when it is missing."""
    path = Path(os.environ.get("ZEROSCALER_TESTDATA") or _DEFAULT)
    if not path.is_dir():
        raise FileNotFoundError(
            f"real operators' manifests not found at {path}: check out shared/ beside the "
            "repository or set ZEROSCALER_TESTDATA"
        )
    return path
