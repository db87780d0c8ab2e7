"""What a PromQL expression asks of the metrics: the series it selects and the labels it names.

No Prometheus runs here, so the chart's alerts and dashboard are checked against the metrics the
components really expose (`testkit/exposed_metrics.py`) by reading their expressions with
this small reader. It knows PromQL's shape (selectors, functions, aggregations and their
grouping, ranges, binary operators) and Grafana's variables (`$namespace`, `$__rate_interval`),
enough to name every metric and label an expression uses; it refuses what it cannot read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

FUNCTIONS = frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "avg_over_time",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "count_over_time",
        "day_of_month",
        "day_of_week",
        "day_of_year",
        "days_in_month",
        "delta",
        "deriv",
        "exp",
        "floor",
        "histogram_avg",
        "histogram_count",
        "histogram_fraction",
        "histogram_quantile",
        "histogram_stddev",
        "histogram_stdvar",
        "histogram_sum",
        "holt_winters",
        "idelta",
        "increase",
        "irate",
        "label_join",
        "label_replace",
        "last_over_time",
        "ln",
        "log10",
        "log2",
        "max_over_time",
        "min_over_time",
        "minute",
        "month",
        "predict_linear",
        "present_over_time",
        "quantile_over_time",
        "rate",
        "resets",
        "round",
        "scalar",
        "sgn",
        "sort",
        "sort_desc",
        "sort_by_label",
        "sort_by_label_desc",
        "sqrt",
        "stddev_over_time",
        "stdvar_over_time",
        "sum_over_time",
        "time",
        "timestamp",
        "vector",
        "year",
    ]
)
AGGREGATIONS = frozenset(
    [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ]
)
GROUPING = frozenset(("by", "without", "on", "ignoring", "group_left", "group_right"))
KEYWORDS = frozenset(("and", "or", "unless", "bool", "offset", "atan2"))
# Labels Prometheus itself gives every series it scrapes (the ServiceMonitor's target labels).
TARGET_LABELS = frozenset(
    ("job", "instance", "namespace", "pod", "service", "endpoint", "container")
)

_TOKEN = re.compile(
    r"""\s+|(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    |(?P<variable>\$\{?\w+\}?)
    |(?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)
    |(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
    |(?P<matcher>=~|!~|!=|==|<=|>=)
    |(?P<punct>[(){}\[\],=+\-*/%^<>@:])""",
    re.VERBOSE,
)


class PromQLError(ValueError):
    """The expression is not one this reader understands."""


@dataclass(frozen=True, slots=True)
class Selector:
    metric: str
    labels: frozenset[str]


@dataclass(frozen=True, slots=True)
class Uses:
    """What an expression uses: its selectors and the labels it groups or matches on."""

    selectors: tuple[Selector, ...]
    grouping: frozenset[str] = field(default_factory=frozenset)


def _tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            raise PromQLError(f"cannot read {expr[pos : pos + 20]!r} in {expr!r}")
        pos = m.end()
        if m.lastgroup:
            out.append((m.lastgroup, m.group(m.lastgroup)))
    return out


def _close(tokens: list[tuple[str, str]], start: int, opening: str, closing: str) -> int:
    """The index of the token that closes the bracket opened at `start`."""
    depth = 0
    for i in range(start, len(tokens)):
        if tokens[i] == ("punct", opening):
            depth += 1
        elif tokens[i] == ("punct", closing):
            depth -= 1
            if depth == 0:
                return i
    raise PromQLError(f"unclosed {opening!r}")


def uses(expr: str) -> Uses:
    """The selectors and grouping labels of a PromQL expression (Grafana variables allowed)."""
    tokens = _tokens(expr)
    selectors: list[Selector] = []
    grouping: set[str] = set()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        after = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
        if kind == "punct" and text == "[":  # a range or subquery: durations only
            i = _close(tokens, i, "[", "]") + 1
            continue
        if kind == "punct" and text == "{":
            raise PromQLError(f"a selector without a metric name in {expr!r}")
        if kind != "name":
            i += 1
            continue
        if text in GROUPING:
            if after == ("punct", "("):
                end = _close(tokens, i + 1, "(", ")")
                grouping.update(t for k, t in tokens[i + 2 : end] if k == "name")
                i = end + 1
            else:
                i += 1  # group_left without labels
            continue
        if text in KEYWORDS:
            i += 1
            continue
        if text in AGGREGATIONS and (after == ("punct", "(") or after[1] in ("by", "without")):
            i += 1
            continue
        if after == ("punct", "("):
            if text not in FUNCTIONS:
                raise PromQLError(f"unknown function {text!r} in {expr!r}")
            i += 1
            continue
        labels: set[str] = set()
        i += 1
        if after == ("punct", "{"):
            end = _close(tokens, i, "{", "}")
            inner = tokens[i + 1 : end]
            for j, (k, t) in enumerate(inner):
                nxt = inner[j + 1] if j + 1 < len(inner) else ("", "")
                if k == "name" and (nxt[0] == "matcher" or nxt == ("punct", "=")):
                    labels.add(t)
            i = end + 1
        selectors.append(Selector(text, frozenset(labels)))
    return Uses(tuple(selectors), frozenset(grouping))


@dataclass(frozen=True, slots=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def check(
    where: str, expr: str, exposed: Mapping[str, frozenset[str]], legend: str = ""
) -> Iterator[Problem]:
    """Every metric `expr` selects must be exposed, with every label it names; so must the labels
    it groups by and those its `legend` ({{label}}) shows."""
    try:
        found = uses(expr)
    except PromQLError as e:
        yield Problem(where, str(e))
        return
    if not found.selectors:
        yield Problem(where, f"selects no metric: {expr!r}")
    known: set[str] = set(TARGET_LABELS)
    for s in found.selectors:
        if s.metric not in exposed:
            yield Problem(where, f"{s.metric} is not exposed")
            continue
        labels = exposed[s.metric] | TARGET_LABELS
        known |= labels
        for label in sorted(s.labels - labels):
            yield Problem(where, f"{s.metric} has no label {label!r}")
    for label in sorted(found.grouping - known):
        yield Problem(where, f"groups by {label!r}, which no metric it selects has")
    for label in sorted(set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend)) - known):
        yield Problem(where, f"legend shows {label!r}, which no metric it selects has")


def label_values_query(query: str) -> tuple[str, str]:
    """Grafana's `label_values(metric, label)` variable query, as (metric, label)."""
    m = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*", query)
    if m is None:
        raise PromQLError(f"not a label_values(metric, label) query: {query!r}")
    return m.group(1), m.group(2)


def dashboard_queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, expression, legend) of every query of a Grafana dashboard, rows' too."""
    found = []
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop(0)
        stack.extend(panel.get("panels") or [])
        for target in panel.get("targets") or []:
            found.append((panel["title"], target["expr"], target.get("legendFormat", "")))
    return found


def dashboard_problems(
    dashboard: Mapping[str, Any], exposed: Mapping[str, frozenset[str]]
) -> list[str]:
    """What a dashboard's queries and variables ask for that is not exposed; no query at all is
    a problem too (a check that reads nothing proves nothing)."""
    queries = dashboard_queries(dashboard)
    found = [str(p) for title, expr, legend in queries for p in check(title, expr, exposed, legend)]
    if not queries:
        found.append("the dashboard has no queries")
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if variable["type"] == "query":
            try:
                metric, label = label_values_query(variable["query"]["query"])
            except PromQLError as e:
                found.append(f"${variable['name']}: {e}")
                continue
            if label not in exposed.get(metric, frozenset()):
                found.append(f"${variable['name']}: {metric} has no label {label!r}")
    return found
