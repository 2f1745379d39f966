"""Who this worker is: its pod name, namespace and uid, from the Downward API."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from kooper.core import errors


class IdentityError(errors.KooperError):
    """The pod's identity is missing from the environment."""


_HINT = "expose it with the Downward API (env valueFrom fieldRef {field})"


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    """The pod this worker runs in."""

    pod: str
    namespace: str
    uid: str = ""
    """The pod's uid (``POD_UID``), for the Lease's ownerReference; empty: look it up."""

    @property
    def lease_name(self) -> str:
        """The member Lease's name, ``kooper-<pod>``."""
        return f"kooper-{self.pod}"

    @property
    def configmap_name(self) -> str:
        """The member ConfigMap's name, ``kooper-<pod>``."""
        return f"kooper-{self.pod}"


def from_env(environ: Mapping[str, str] | None = None) -> Identity:
    """Read ``POD_NAME``, ``POD_NAMESPACE`` and (optional) ``POD_UID``."""
    env = os.environ if environ is None else environ
    missing = [
        f"{name} is not set: {_HINT.format(field=field)}"
        for name, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"))
        if not env.get(name)
    ]
    if missing:
        raise IdentityError("; ".join(missing))
    return Identity(pod=env["POD_NAME"], namespace=env["POD_NAMESPACE"], uid=env.get("POD_UID", ""))
