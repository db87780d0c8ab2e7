"""AdmissionReview `admission.k8s.io/v1`: checking a request envelope and building the response."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, cast

from zeroscaler.core.admission import AdmissionRequest, AdmissionResponse, AdmissionReview

API_VERSION = "admission.k8s.io/v1"
_MAX_WARNINGS = 20


class BadReview(ValueError):
    """A body that is not an AdmissionReview request; the message says what is wrong."""


def parse_review(body: bytes) -> AdmissionReview:
    """The review in a request body; raise BadReview naming the first problem."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise BadReview("body is not JSON (expected an AdmissionReview object)") from e
    if not isinstance(data, dict):
        raise BadReview("body is not a JSON object (expected an AdmissionReview object)")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != "AdmissionReview":
        raise BadReview(f'apiVersion and kind must be "{API_VERSION}" and "AdmissionReview"')
    request = data.get("request")
    if not isinstance(request, dict):
        raise BadReview("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or not a string")
    _check_types(request)
    return cast(AdmissionReview, data)


def _check_types(request: dict[str, Any]) -> None:
    for key in ("kind", "resource", "requestKind", "requestResource", "userInfo"):
        value = request.get(key)
        if value is not None and not isinstance(value, dict):
            raise BadReview(f"request.{key} is not an object")
    for key in ("object", "oldObject", "options"):
        value = request.get(key)
        if value is not None and not isinstance(value, dict):
            raise BadReview(f"request.{key} is not an object or null")
    for key in ("name", "namespace", "operation", "subResource"):
        value = request.get(key)
        if value is not None and not isinstance(value, str):
            raise BadReview(f"request.{key} is not a string")
    if request.get("dryRun") is not None and not isinstance(request.get("dryRun"), bool):
        raise BadReview("request.dryRun is not a boolean")


def build_response(
    request: AdmissionRequest, patch: Sequence[dict[str, Any]], warnings: Sequence[str]
) -> AdmissionReview:
    """Allow the request, with the patch (and its type) only when there is one."""
    response: AdmissionResponse = {"uid": request.get("uid", ""), "allowed": True}
    if patch:
        encoded = json.dumps(list(patch), separators=(",", ":")).encode()
        response["patch"] = base64.b64encode(encoded).decode()
        response["patchType"] = "JSONPatch"
    if warnings:
        response["warnings"] = list(dict.fromkeys(warnings))[:_MAX_WARNINGS]
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
