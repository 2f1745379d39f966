"""The emulated server's failure answers, shaped like the API server's `Status` bodies (server side:
clients see them as `kooper.sdk.apierrors`)."""

from typing import Any

from kooper.emulator import resources


class StatusFailure(Exception):
    """A failed API call: HTTP code, Kubernetes reason and a message for humans."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        spec: resources.ResourceSpec | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.spec = spec
        self.name = name

    def status(self) -> dict[str, Any]:
        """The `Status` body the API server would answer with."""
        details: dict[str, Any] = {}
        if self.name is not None:
            details["name"] = self.name
        if self.spec is not None:
            details["group"] = self.spec.group
            details["kind"] = self.spec.plural
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": details,
            "code": self.code,
        }


def not_found(spec: resources.ResourceSpec, name: str) -> StatusFailure:
    """404 NotFound for a missing object."""
    qualified = f"{spec.plural}.{spec.group}" if spec.group else spec.plural
    return StatusFailure(404, "NotFound", f'{qualified} "{name}" not found', spec=spec, name=name)


def already_exists(spec: resources.ResourceSpec, name: str) -> StatusFailure:
    """409 AlreadyExists for a create of an existing name."""
    return StatusFailure(409, "AlreadyExists", f'{spec.plural} "{name}" already exists',
                    spec=spec, name=name)


def conflict(spec: resources.ResourceSpec, name: str, why: str | None = None) -> StatusFailure:
    """409 Conflict: optimistic concurrency (stale resourceVersion) or injected."""
    message = why or (
        f'Operation cannot be fulfilled on {spec.plural} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again")
    return StatusFailure(409, "Conflict", message, spec=spec, name=name)


def invalid(spec: resources.ResourceSpec, name: str, why: str) -> StatusFailure:
    """422 Invalid: the request is well-formed but cannot be applied."""
    return StatusFailure(422, "Invalid", f'{spec.kind} "{name}" is invalid: {why}', spec=spec,
                    name=name)


def bad_request(message: str) -> StatusFailure:
    """400 BadRequest: a malformed request."""
    return StatusFailure(400, "BadRequest", message)
