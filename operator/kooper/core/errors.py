"""Errors of the functional core and the protocol (one base, named subclasses)."""


class KooperError(Exception):
    """Base of every error kooper raises on purpose."""


class InvalidSnapshotError(KooperError):
    """A snapshot that no round can be planned from (a bug in whoever built it)."""


class ProtocolError(KooperError):
    """A payload broke the operator/worker protocol."""


class LocalProtocolError(ProtocolError):
    """We were about to send something illegal: a bug on our side, crash loudly."""


class RemoteProtocolError(ProtocolError):
    """A peer sent something illegal: ignore it, record an Event, keep serving."""


class InvalidDurationError(KooperError, ValueError):
    """A duration outside the one language kooper accepts (``core.durations``)."""
