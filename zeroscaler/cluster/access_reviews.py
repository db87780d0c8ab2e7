"""SelfSubjectAccessReviews: what a caller may do, asked of the API server itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SELF_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def self_access_review(
    verb: str, group: str, resource: str, namespace: str = "", subresource: str = ""
) -> dict[str, Any]:
    """The body of a SelfSubjectAccessReview: may the caller do `verb` on this resource?"""
    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    if subresource:
        attributes["subresource"] = subresource
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


def review_allowed(answer: Mapping[str, Any]) -> bool:
    """Whether an access review's answer allows the request."""
    return bool((answer.get("status") or {}).get("allowed"))
