"""An in-process Kubernetes API emulator for the operator's tests and the demo cluster.

`EmulatedCluster` serves the API over real HTTP on 127.0.0.1 from a thread of
its own; `OperatorThread` (in `kooper.emulator.kopfthread`, which imports
kopf) runs a kopf operator against it. See docs/emulator.md.
"""

from kooper.emulator.cluster import EmulatedCluster
from kooper.emulator.errors import StatusFailure
from kooper.emulator.resources import BUILTINS, KOOPER_CRDS, ResourceSpec, load_crds

__all__ = [
    "BUILTINS", "KOOPER_CRDS", "EmulatedCluster", "ResourceSpec", "StatusFailure", "load_crds",
]
