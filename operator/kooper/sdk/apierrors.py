"""The one family of Kubernetes API errors, for the worker SDK and the operator alike.

Modelled on kopf's (``APIError`` → ``APIClientError``/``APIServerError`` → one class
per status a caller acts on): catch the class, never compare ``status`` numbers.
``status`` is always an int: the HTTP status, or 0 when the API server was not
reached at all (connection refused, TLS, timeout), which is ``Unreachable``.

    try:
        api.get(path)
    except apierrors.NotFound:
        ...

The table ``BY_STATUS`` is the only place a status number maps to a class.
"""

from __future__ import annotations

from kooper.core import errors


class ApiError(errors.KooperError):
    """A Kubernetes API request failed: ``status`` (0: unreachable), ``reason`` and message."""

    def __init__(self, message: str, *, status: int, reason: str = "",
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.retry_after_s = retry_after_s
        """The server's ``Retry-After`` in seconds, when it sent one (429, some 503s)."""


class Unreachable(ApiError):
    """No answer: the connection failed or timed out (``status`` 0)."""


class ClientError(ApiError):
    """4xx: the request was wrong, or not allowed, as sent."""


class ServerError(ApiError):
    """5xx: the API server (or what is behind it) failed."""


class Unauthorized(ClientError):
    """401: the credentials were rejected (expired or revoked): log in again."""


class Forbidden(ClientError):
    """403: authenticated, but RBAC or an admission policy denies it."""


class NotFound(ClientError):
    """404: the object, its namespace or its kind does not exist."""


class Conflict(ClientError):
    """409: a precondition failed (``resourceVersion``) or the object already exists."""


class Gone(ClientError):
    """410: a watch's ``resourceVersion`` was compacted away: list again."""


class Invalid(ClientError):
    """422: the object fails validation (schema, CEL rules)."""


class TooManyRequests(ClientError):
    """429: API priority and fairness throttled us: wait ``retry_after_s`` and retry."""


BY_STATUS: dict[int, type[ApiError]] = {
    0: Unreachable,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_for(status: int, message: str, *, reason: str = "",
              retry_after_s: float | None = None) -> ApiError:
    """The error of the family that ``status`` maps to (4xx/5xx by range otherwise)."""
    cls = BY_STATUS.get(status) or (
        ServerError if status >= 500 else ClientError if status >= 400 else ApiError)
    return cls(message, status=status, reason=reason, retry_after_s=retry_after_s)
