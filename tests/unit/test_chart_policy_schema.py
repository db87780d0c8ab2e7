"""The chart's schema takes every policy field the policy parser reads, and no other: a value set
in `policy` is never refused by Helm that the controller would take, or the other way round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zeroscaler.core import policy

SCHEMA = Path(__file__).resolve().parents[2] / "charts" / "zeroscaler" / "values.schema.json"


def test_the_schema_of_policy_defaults_and_rules_is_the_parsers() -> None:
    sections: dict[str, Any] = json.loads(SCHEMA.read_text())["properties"]["policy"]["properties"]
    assert set(sections["defaults"]["properties"]) == set(policy._DEFAULT_FIELDS)
    assert set(sections["rules"]["items"]["properties"]) == set(policy._RULE_FIELDS)
