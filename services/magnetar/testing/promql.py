"""The metric names a PromQL expression reads, for tests that check dashboards and alert
rules against what the services expose.

Not a PromQL parser: enough of one for the expressions we ship. Strings, label matchers
(``{...}``), ranges (``[5m]``), grouping label lists (``by (...)``, ``on (...)`` …),
numbers, durations and Grafana variables are removed; what is left are identifiers, of
which those followed by ``(`` are functions or aggregations and a few are keywords. A
Grafana ``label_values(expr, label)`` query reads only ``expr``.
"""

from __future__ import annotations

import re

KEYWORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "inf", "nan", "atan2",
})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w:])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:ms|[smhdwy])?)(?![\w:])")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((.*),\s*[A-Za-z_]\w*\s*\)\s*$", re.DOTALL)


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (a PromQL expression or a Grafana
    ``label_values(...)`` / ``query_result(...)`` variable query)."""
    if m := _LABEL_VALUES.match(expr):
        expr = m.group(1)
    text = _GRAFANA_VARIABLE.sub(" ", _STRING.sub('""', expr))
    while True:  # innermost first: a matcher holds no braces once its strings are gone
        stripped = _RANGE.sub(" ", _MATCHERS.sub(" ", text))
        if stripped == text:
            break
        text = stripped
    text = _GROUPING.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for m in _IDENTIFIER.finditer(text):
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or m.group().lower() in KEYWORDS:
            continue
        names.add(m.group())
    return names


def dashboard_exprs(dashboard: dict) -> list[str]:
    """Every query of a Grafana dashboard: its panels' (rows' too) and its variables'."""
    out: list[str] = []

    def panels(items: list) -> None:
        for panel in items:
            out.extend(t["expr"] for t in panel.get("targets", []) if t.get("expr"))
            panels(panel.get("panels", []))

    panels(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            out.append(query["query"] if isinstance(query, dict) else query)
    return out


def rule_exprs(rules_file: dict) -> list[str]:
    """Every ``expr`` of a Prometheus rules file (or a PrometheusRule's ``spec``)."""
    return [rule["expr"] for group in rules_file["groups"] for rule in group["rules"]]
