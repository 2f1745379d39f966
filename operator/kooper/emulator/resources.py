"""What the emulator serves: resource kinds, their scope and subresources.

A `ResourceSpec` is the emulator's whole idea of a resource kind: enough for
API discovery (so kopf finds it), URL routing, and the status/scale
subresource rules. `load_crds` turns CustomResourceDefinition YAML (the
project's `crds/*.yaml`) into specs; `BUILTINS` holds the built-in kinds the
operator, the workers and kopf touch.
"""

import dataclasses
import pathlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclasses.dataclass(frozen=True, slots=True)
class PrinterColumn:
    """A CRD ``additionalPrinterColumns`` entry: what ``kubectl get`` shows (Table output)."""

    name: str
    type: str
    json_path: str
    format: str = ""
    description: str = ""
    priority: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceSpec:
    """One served resource kind (one group/version/plural)."""

    group: str
    """API group; "" for the core group served under /api/v1."""
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False
    """Has a /status subresource: the main endpoint then ignores status changes."""
    scale: bool = False
    """Has a /scale subresource (autoscaling/v1 Scale)."""
    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    columns: tuple[PrinterColumn, ...] = dataclasses.field(default=(), compare=False)
    """A CRD's printer columns (Table output); built-in kinds have theirs in ``tables``."""
    schema: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False,
                                                         hash=False)
    """A CRD version's ``openAPIV3Schema`` (OpenAPI v3 and strict field validation)."""

    @property
    def api_version(self) -> str:
        """The apiVersion objects of this kind carry ("v1", "apps/v1", ...)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """The canonical "group/version/plural" name ("v1/pods" for the core group)."""
        return f"{self.api_version}/{self.plural}"

    @property
    def subresources(self) -> tuple[str, ...]:
        """The subresources this kind serves, as discovery lists them."""
        return (("status",) if self.status else ()) + (("scale",) if self.scale else ())

    @property
    def singular(self) -> str:
        """The singular name, as discovery reports it (the lower-cased kind)."""
        return self.kind.lower()

    @property
    def verbs(self) -> tuple[str, ...]:
        """Every verb: the emulator serves all of them for every kind."""
        return _ALL_VERBS


BUILTINS: tuple[ResourceSpec, ...] = (
    ResourceSpec("", "v1", "namespaces", "Namespace", namespaced=False, status=True,
                 short_names=("ns",)),
    ResourceSpec("", "v1", "pods", "Pod", status=True, short_names=("po",), categories=("all",)),
    ResourceSpec("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    ResourceSpec("", "v1", "secrets", "Secret"),
    ResourceSpec("", "v1", "services", "Service", status=True, short_names=("svc",),
                 categories=("all",)),
    ResourceSpec("", "v1", "events", "Event", short_names=("ev",)),
    ResourceSpec("apps", "v1", "statefulsets", "StatefulSet", status=True, scale=True,
                 short_names=("sts",), categories=("all",)),
    ResourceSpec("apps", "v1", "deployments", "Deployment", status=True, scale=True,
                 short_names=("deploy",), categories=("all",)),
    ResourceSpec("apps", "v1", "replicasets", "ReplicaSet", status=True, scale=True,
                 short_names=("rs",), categories=("all",)),
    ResourceSpec("coordination.k8s.io", "v1", "leases", "Lease"),
    ResourceSpec("events.k8s.io", "v1", "events", "Event", short_names=("ev",)),
)
"""Built-in kinds served by default."""

KOOPER_CRDS: tuple[ResourceSpec, ...] = (
    ResourceSpec("kooper.dev", "v1alpha1", "workergroups", "WorkerGroup", status=True,
                 short_names=("wg",), categories=("kooper",)),
    ResourceSpec("kooper.dev", "v1alpha1", "connectors", "Connector", status=True, scale=True,
                 spec_replicas_path=".spec.tasksMax", status_replicas_path=".status.taskCount",
                 short_names=("kconn",), categories=("kooper",)),
)
"""The project's own kinds as the CRD contract names them (used when no CRD YAML is loaded)."""


def specs_from_crd(crd: Mapping[str, Any]) -> list[ResourceSpec]:
    """Turn one CustomResourceDefinition document into a spec per served version."""
    if crd.get("kind") != "CustomResourceDefinition":
        return []
    spec = crd["spec"]
    names = spec["names"]
    result: list[ResourceSpec] = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        result.append(ResourceSpec(
            group=spec["group"],
            version=version["name"],
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            status="status" in subresources,
            scale=scale is not None,
            spec_replicas_path=(scale or {}).get("specReplicasPath", ".spec.replicas"),
            status_replicas_path=(scale or {}).get("statusReplicasPath", ".status.replicas"),
            short_names=tuple(names.get("shortNames", ())),
            categories=tuple(names.get("categories", ())),
            columns=tuple(
                PrinterColumn(name=c["name"], type=c.get("type", "string"),
                              json_path=c["jsonPath"], format=c.get("format", ""),
                              description=c.get("description", ""),
                              priority=int(c.get("priority", 0)))
                for c in version.get("additionalPrinterColumns") or ()),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        ))
    return result


def load_crds(paths: Iterable[pathlib.Path | str]) -> list[ResourceSpec]:
    """Read CRD YAML files (several documents per file allowed) into specs."""
    result: list[ResourceSpec] = []
    for path in paths:
        text = pathlib.Path(path).read_text(encoding="utf-8")
        for document in yaml.safe_load_all(text):
            if isinstance(document, Mapping):
                result.extend(specs_from_crd(document))
    return result


class Registry:
    """The set of served kinds, looked up by URL parts or by a short reference."""

    def __init__(self, specs: Iterable[ResourceSpec] = ()) -> None:
        self._by_key: dict[tuple[str, str, str], ResourceSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: ResourceSpec) -> None:
        """Serve one more kind (replacing a kind with the same group/version/plural)."""
        self._by_key[(spec.group, spec.version, spec.plural)] = spec

    def __iter__(self) -> Iterator[ResourceSpec]:
        return iter(list(self._by_key.values()))

    def find(self, group: str, version: str, plural: str) -> ResourceSpec | None:
        """The spec served at these URL parts, if any."""
        return self._by_key.get((group, version, plural))

    def resolve(self, ref: "str | ResourceSpec") -> ResourceSpec:
        """Find a kind by "group/version/plural", "v1/pods", a plural, a kind or a short name.

        Raises `LookupError` when nothing or more than one kind matches.
        """
        if isinstance(ref, ResourceSpec):
            return ref
        parts = ref.split("/")
        if len(parts) == 3:
            found = self.find(parts[0], parts[1], parts[2])
            matches = [found] if found else []
        elif len(parts) == 2 and parts[0] == "v1":
            found = self.find("", "v1", parts[1])
            matches = [found] if found else []
        else:
            low = ref.lower()
            matches = [s for s in self._by_key.values()
                       if low in (s.plural, s.kind.lower(), *s.short_names)]
            # "events" exists in two groups: prefer the core one, as kubectl does.
            if len(matches) > 1:
                matches = [s for s in matches if s.group == ""] or matches
        if len(matches) != 1:
            raise LookupError(f"no single served resource for {ref!r}: {len(matches)} match")
        return matches[0]
