"""What goes over the wire: requests as built, answers as read, and when to try again.

Both clients use these, like lightkube's sync and async clients share one builder:
the worker's ``sdk.kube.Api`` (standard library) and the operator's
``shell.kube.Client`` (aiohttp). Every request names kooper in ``User-Agent``;
every write names its ``fieldManager``, so ``managedFields`` say who wrote what.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import random
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import kooper
from kooper.sdk import apierrors

MERGE_PATCH = "application/merge-patch+json"
WRITES = frozenset({"POST", "PUT", "PATCH"})
"""Methods that take a ``fieldManager`` (DELETE does not)."""
MAX_RETRY_AFTER_S = 30.0
"""A ``Retry-After`` longer than this is cut to it (a broken proxy could say a day)."""


def user_agent(role: str) -> str:
    """``kooper/<version> (<role>)``: what the API server's audit log and metrics show."""
    return f"kooper/{kooper.__version__} ({role})"


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One API request as built, before a transport sends it."""

    method: str
    target: str
    """The path and query string (``/api/v1/namespaces/ns/configmaps?labelSelector=a%3Db``)."""
    body: bytes | None
    headers: Mapping[str, str]


def build_request(
    method: str,
    path: str,
    *,
    role: str,
    body: Mapping[str, Any] | None = None,
    content_type: str = "application/json",
    query: Mapping[str, str] | None = None,
    authorization: str | None = None,
) -> Request:
    """A JSON request to ``path`` by kooper's ``role`` (``operator``, ``worker``).

    Compact JSON body; ``Content-Type`` only with a body; ``fieldManager=kooper-<role>``
    on every write.
    """
    query = dict(query or {})
    if method in WRITES:
        query.setdefault("fieldManager", f"kooper-{role}")
    target = path + ("?" + urllib.parse.urlencode(query) if query else "")
    data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    headers = {"Accept": "application/json", "User-Agent": user_agent(role)}
    if data is not None:
        headers["Content-Type"] = content_type
    if authorization:
        headers["Authorization"] = authorization
    return Request(method, target, data, headers)


def decode_answer(payload: bytes | str) -> dict[str, Any] | None:
    """A successful answer's JSON object (``{}`` when empty); None when it is not JSON."""
    if not payload:
        return {}
    try:
        answer = json.loads(payload)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else {}


def failure(method: str, path: str, status: int, payload: bytes | str, *,
            reason: str = "", retry_after: str | None = None) -> apierrors.ApiError:
    """The error for a failed answer: its ``Status`` message and reason, and ``Retry-After``."""
    message, status_reason = _status_of(payload, reason)
    return apierrors.error_for(status, f"{method} {path}: {status} {message}",
                               reason=status_reason, retry_after_s=retry_after_s(retry_after))


def _status_of(payload: bytes | str, fallback: str) -> tuple[str, str]:
    try:
        status = json.loads(payload or b"{}")
    except ValueError:
        return fallback, fallback
    if not isinstance(status, dict):
        return fallback, fallback
    return str(status.get("message") or fallback), str(status.get("reason") or fallback)


def retry_after_s(value: str | None, *, now: float | None = None) -> float | None:
    """A ``Retry-After`` header (delta-seconds or an HTTP date) in seconds, capped; None if
    absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now is None else now
    return min(max(0.0, when.timestamp() - now), MAX_RETRY_AFTER_S)


def backoff_s(attempt: int, *, base_s: float, cap_s: float,
              rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform in ``[0, min(cap, base·2^attempt)]``.

    Jitter keeps a thousand workers that lost the API at once from coming back at once.
    """
    ceiling = min(cap_s, base_s * (2 ** min(attempt, 32)))
    return (rng or random).uniform(0.0, ceiling)


def throttled_delay_s(error: apierrors.ApiError, attempt: int, *, base_s: float = 0.5,
                      cap_s: float = 10.0, rng: random.Random | None = None) -> float | None:
    """How long to wait before sending again what ``error`` answered, or None not to.

    Only 429 (API priority and fairness rejected it before it ran, so any method
    may be sent again): the server's ``Retry-After`` when given, else jittered backoff.
    """
    if not isinstance(error, apierrors.TooManyRequests):
        return None
    if error.retry_after_s is not None:
        return error.retry_after_s
    return backoff_s(attempt, base_s=base_s, cap_s=cap_s, rng=rng)


# --- paths ----------------------------------------------------------------------------

def lease_path(namespace: str, name: str | None = None) -> str:
    """The URL path of a Lease (or of the namespace's Leases)."""
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return base if name is None else f"{base}/{name}"


def configmap_path(namespace: str, name: str | None = None) -> str:
    """The URL path of a ConfigMap (or of the namespace's ConfigMaps)."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    return base if name is None else f"{base}/{name}"


def pod_path(namespace: str, name: str) -> str:
    """The URL path of a Pod."""
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def custom_resource_path(plural: str, namespace: str, name: str | None = None, *,
                         group: str = "kooper.dev", version: str = "v1alpha1") -> str:
    """The URL path of a custom resource (or of the namespace's collection)."""
    base = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"
    return base if name is None else f"{base}/{name}"


def apps_path(plural: str, namespace: str, name: str) -> str:
    """The URL path of an ``apps/v1`` object (a StatefulSet or a ReplicaSet)."""
    return f"/apis/apps/v1/namespaces/{namespace}/{plural}/{name}"


def event_path(namespace: str) -> str:
    """The URL path of the namespace's core/v1 Events."""
    return f"/api/v1/namespaces/{namespace}/events"
