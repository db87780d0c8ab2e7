"""Kubernetes label selectors (matchLabels AND matchExpressions) parsed from decoded YAML."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
_OPERATORS: tuple[Operator, ...] = ("In", "NotIn", "Exists", "DoesNotExist")
SELECTOR_FORM = "{matchLabels: {key: value}, matchExpressions: [{key, operator, values}]}"


class SelectorError(ValueError):
    """A selector that is not of the Kubernetes form."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` entry."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    """All of `match_labels` and all of `match_expressions` must hold; empty matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )


EVERYTHING = Selector()


def parse_selector(value: object, where: str) -> Selector:
    """A Selector from a decoded `{matchLabels, matchExpressions}` map; errors name `where`."""
    if value is None:
        return EVERYTHING
    if not isinstance(value, Mapping):
        raise SelectorError(f"{where}: expected a map {SELECTOR_FORM}")
    unknown = sorted(str(k) for k in value if k not in ("matchLabels", "matchExpressions"))
    if unknown:
        raise SelectorError(
            f"{where}.{unknown[0]}: unknown field (expected matchLabels or matchExpressions)"
        )
    labels = value.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise SelectorError(f"{where}.matchLabels: expected a map of label names to strings")
    pairs = []
    for k, v in labels.items():
        if not isinstance(k, str):
            raise SelectorError(
                f"{where}.matchLabels.{k}: label names must be strings (quote them)"
            )
        if not isinstance(v, str | int | float | bool):
            raise SelectorError(f"{where}.matchLabels.{k}: expected a string value")
        pairs.append((k, _label_text(v)))
    expressions = value.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError(
            f"{where}.matchExpressions: expected a list of {{key, operator, values}}"
        )
    reqs = tuple(
        _parse_requirement(e, f"{where}.matchExpressions[{i}]") for i, e in enumerate(expressions)
    )
    return Selector(tuple(sorted(pairs)), reqs)


def _parse_requirement(value: object, where: str) -> Requirement:
    if not isinstance(value, Mapping):
        raise SelectorError(f"{where}: expected a map {{key, operator, values}}")
    key, operator, values = value.get("key"), value.get("operator"), value.get("values")
    if not isinstance(key, str) or not key:
        raise SelectorError(f"{where}.key: expected a label name")
    if operator not in _OPERATORS:
        raise SelectorError(f"{where}.operator: {operator!r} is not one of {', '.join(_OPERATORS)}")
    op = cast(Operator, operator)
    if op in ("In", "NotIn"):
        if not isinstance(values, list) or not values:
            raise SelectorError(f"{where}.values: {op} needs a non-empty list of strings")
        if not all(isinstance(v, str | int | float | bool) for v in values):
            raise SelectorError(f"{where}.values: expected a list of strings")
        return Requirement(key, op, frozenset(_label_text(v) for v in values))
    if values:
        raise SelectorError(f"{where}.values: {op} takes no values")
    return Requirement(key, op)


def _label_text(value: str | int | float | bool) -> str:
    # YAML turns `env: true` or `tier: 1` into non-strings; labels are always strings.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
