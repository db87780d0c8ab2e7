"""The chart README's values table, made from values.yaml and its comments (as helm-docs does).

`python -m tools.chart_readme` rewrites the table between the README's two markers;
`--check` exits 1 when the README is stale. Each row is a value (a section of values, as
the schema tells, is not one: its values are), its type, its default and its description: the
comment lines right above its key, at its indentation. Commented-out examples (`#  - name: x`,
indented past the `#` by two spaces or more) that follow a key are not a description of the next.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "zeroscaler"
START = "<!-- values table: made by `python -m tools.chart_readme`; do not edit -->"
END = "<!-- end of values table -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*):(?:\s|$)")
_COMMENT = re.compile(r"^(?P<indent> *)#(?P<text>.*)$")


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    type: str
    default: str
    description: str


def descriptions(text: str) -> dict[str, str]:
    """Each key's dotted path -> the comment above it, joined into one line."""
    found: dict[str, str] = {}
    path: list[tuple[int, str]] = []  # (indentation, key) of the keys enclosing this line
    lines = text.splitlines()
    for number, line in enumerate(lines):
        m = _KEY.match(line)
        if m is None:
            continue
        indent = len(m["indent"])
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, m["key"]))
        found[".".join(k for _, k in path)] = _comment_above(lines, number, indent)
    return found


def _comment_above(lines: list[str], number: int, indent: int) -> str:
    block: list[str] = []
    for line in reversed(lines[:number]):
        m = _COMMENT.match(line)
        if m is None or len(m["indent"]) != indent:
            break
        block.insert(0, m["text"])
    while block and block[0].startswith("  "):  # an example that follows the key above
        block.pop(0)
    return " ".join(part.strip() for part in block if part.strip())


def rows(
    values: dict[str, Any], schema: dict[str, Any], notes: dict[str, str], prefix: str = ""
) -> Iterator[Row]:
    """A row per value; a map the schema gives fields of is a section: its values are rows of
    their own, and the section has one too when its key is described."""
    definitions = schema.get("definitions", {})
    for key, value in values.items():
        path = f"{prefix}{key}"
        node = _resolve(schema.get("properties", {}).get(key, {}), definitions)
        if isinstance(value, dict) and value and "properties" in node:
            if notes.get(path):
                yield Row(path, "map", "", notes[path])
            yield from rows(value, {**node, "definitions": definitions}, notes, f"{path}.")
            continue
        yield Row(path, _type(value), _default(value), notes.get(path, ""))


def _resolve(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref", "")
    if ref.startswith("#/definitions/"):
        return _resolve(definitions[ref.removeprefix("#/definitions/")], definitions)
    return node


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "map"}[
        type(value)
    ]


def _default(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(values_text: str, schema: dict[str, Any]) -> str:
    notes = descriptions(values_text)
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for row in rows(yaml.safe_load(values_text), schema, notes):
        default = f"`{_cell(row.default)}`" if row.default else ""
        lines.append(f"| `{row.key}` | {row.type} | {default} | {_cell(row.description)} |")
    return "\n".join(lines)


def updated(readme: str, values_text: str, schema: dict[str, Any]) -> str:
    """The README with its values table made afresh from the values file (and the schema, which
    tells sections from values that are maps)."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the chart README has no markers {START!r} ... {END!r}")
    return (
        readme[: start + len(START)] + "\n\n" + table(values_text, schema) + "\n\n" + readme[end:]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.chart_readme", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is stale")
    args = parser.parse_args(argv)
    readme_path = CHART / "README.md"
    readme = readme_path.read_text()
    schema = json.loads((CHART / "values.schema.json").read_text())
    fresh = updated(readme, (CHART / "values.yaml").read_text(), schema)
    if args.check:
        if fresh != readme:
            print(f"{readme_path.name} is stale: run python -m tools.chart_readme", file=sys.stderr)
            return 1
        return 0
    readme_path.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
