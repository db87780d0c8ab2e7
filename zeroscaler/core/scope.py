"""Where a workload's ServiceAccount may watch a type, from SubjectAccessReview answers.

The rules ask one question at a time, so a caller asks the API server only what the answers so far
leave open: `resolve_scope` returns the `ReviewNeeded` next, or the `ResolvedScope` once the
answers settle it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zeroscaler.core.activity import Scope
from zeroscaler.core.annotations import WATCH_NAMESPACES

EVERYWHERE = ""  # the namespace asked about for "in every namespace" (or a cluster-scoped type)


@dataclass(frozen=True, slots=True)
class ReviewNeeded:
    """The next question: may the ServiceAccount watch the type in `namespace`?"""

    namespace: str


@dataclass(frozen=True, slots=True)
class ResolvedScope:
    """Whether changes count, in which namespaces (None: all), and where watching was denied."""

    permitted: bool
    scope: Scope = None
    denied: tuple[str, ...] = ()  # "in namespace x"-style phrases, one per refusal


def resolve_scope(
    namespaced: bool,
    home: str,
    wanted: tuple[str, ...] | None,
    answers: Mapping[str, bool],
) -> ReviewNeeded | ResolvedScope:
    """The next namespace to ask about, or the scope that the answers so far give."""
    # home: the workload's namespace; wanted: its watch-namespaces (None: whatever RBAC allows).
    if EVERYWHERE not in answers and (not namespaced or wanted is None or wanted == ("*",)):
        return ReviewNeeded(EVERYWHERE)
    if not namespaced:
        return _everywhere(answers, "(cluster-scoped)")
    if wanted == ("*",):
        return _everywhere(answers, f"in all namespaces ({WATCH_NAMESPACES}: *)")
    if wanted is None:
        if answers[EVERYWHERE]:
            return ResolvedScope(True)
        if home not in answers:
            return ReviewNeeded(home)
        if answers[home]:
            return ResolvedScope(True, frozenset({home}))
        return ResolvedScope(False, denied=("in any namespace",))
    for namespace in wanted:
        if namespace not in answers:
            return ReviewNeeded(namespace)
    allowed = frozenset(n for n in wanted if answers[n])
    denied = tuple(f"in namespace {n}" for n in wanted if not answers[n])
    return ResolvedScope(True, allowed, denied) if allowed else ResolvedScope(False, denied=denied)


def _everywhere(answers: Mapping[str, bool], where: str) -> ResolvedScope:
    return ResolvedScope(True) if answers[EVERYWHERE] else ResolvedScope(False, denied=(where,))
