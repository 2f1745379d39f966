"""What the emulator says about itself: API discovery and OpenAPI v3, as kubectl reads them.

Built from the registry on every request (kinds can be registered at runtime),
in the shapes the real API server uses:

* legacy discovery: ``/api`` (APIVersions), ``/api/v1`` (an APIResourceList whose
  ``groupVersion`` is ``"v1"``: kubectl resolves ``pods`` and ``cm`` from it),
  ``/apis`` (APIGroupList), ``/apis/<group>`` and ``/apis/<group>/<version>``;
  subresources are listed as ``<plural>/status`` (get, patch, update) and
  ``<plural>/scale`` (kind Scale of autoscaling/v1), without short names, so
  ``kubectl get wg`` is not ambiguous. Aggregated discovery is not served:
  kubectl falls back to these documents.
* OpenAPI v3: ``/openapi/v3`` lists one document per group/version, each with
  the kinds' paths. Every PATCH and POST declares the ``fieldValidation`` query
  parameter, so ``kubectl apply`` (``--validate=strict``, its default) lets the
  server check fields (``validation.unknown_fields``) instead of fetching the
  OpenAPI v2 protobuf this emulator does not serve. No PATCH offers
  strategic-merge content, so kubectl computes strategic merge patches for
  built-in kinds from its own types and JSON merge patches for custom ones.
  Component schemas are the CRDs' ``openAPIV3Schema`` (``kubectl explain``);
  built-in kinds get an open object schema.
"""

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from kooper.emulator import resources

_SUBRESOURCE_VERBS = ["get", "patch", "update"]


def _group_versions(registry: resources.Registry) -> dict[str, list[str]]:
    """Named groups (not the core one) and their versions, in registration order."""
    groups: dict[str, list[str]] = {}
    for spec in registry:
        if spec.group and spec.version not in groups.setdefault(spec.group, []):
            groups[spec.group].append(spec.version)
    return groups


def core_versions() -> dict[str, Any]:
    """``/api``."""
    return {"kind": "APIVersions", "versions": ["v1"]}


def _group_document(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def group_list(registry: resources.Registry) -> dict[str, Any]:
    """``/apis``."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        _group_document(name, versions)
        for name, versions in _group_versions(registry).items()]}


def group(registry: resources.Registry, name: str) -> dict[str, Any] | None:
    """``/apis/<name>``, or None when no kind is served in that group."""
    versions = _group_versions(registry).get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_document(name, versions)}


def _specs(registry: resources.Registry, group_name: str,
           version: str) -> list[resources.ResourceSpec]:
    return [s for s in registry if (s.group, s.version) == (group_name, version)]


def resource_list(registry: resources.Registry, group_name: str,
                  version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``, or None when nothing is served there."""
    specs = _specs(registry, group_name, version)
    if not specs:
        return None
    listed: list[dict[str, Any]] = []
    for spec in specs:
        entry: dict[str, Any] = {"name": spec.plural, "singularName": spec.singular,
                                 "namespaced": spec.namespaced, "kind": spec.kind,
                                 "verbs": list(spec.verbs)}
        if spec.short_names:
            entry["shortNames"] = list(spec.short_names)
        if spec.categories:
            entry["categories"] = list(spec.categories)
        listed.append(entry)
        if spec.status:
            listed.append({"name": f"{spec.plural}/status", "singularName": "",
                           "namespaced": spec.namespaced, "kind": spec.kind,
                           "verbs": _SUBRESOURCE_VERBS})
        if spec.scale:
            listed.append({"name": f"{spec.plural}/scale", "singularName": "",
                           "namespaced": spec.namespaced, "group": "autoscaling",
                           "version": "v1", "kind": "Scale", "verbs": _SUBRESOURCE_VERBS})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group_name}/{version}" if group_name else version,
            "resources": listed}


# -- OpenAPI v3 -------------------------------------------------------------------------

def _gv_path(group_name: str, version: str) -> str:
    return f"apis/{group_name}/{version}" if group_name else f"api/{version}"


def _gv_pairs(registry: resources.Registry) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for spec in registry:
        if (spec.group, spec.version) not in pairs:
            pairs.append((spec.group, spec.version))
    return pairs


def openapi_index(registry: resources.Registry) -> dict[str, Any]:
    """``/openapi/v3``: one document per group/version, its URL carrying a content hash."""
    paths = {}
    for group_name, version in _gv_pairs(registry):
        path = _gv_path(group_name, version)
        document = openapi_document(registry, path)
        digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest.upper()}"}
    return {"paths": paths}


def _schema_name(spec: resources.ResourceSpec) -> str:
    """``dev.kooper.v1alpha1.WorkerGroup``, ``io.k8s.api.core.v1.Pod``: the API server's names."""
    if spec.schema is None:
        group_name = spec.group.split(".")[0] if spec.group else "core"
        return f"io.k8s.api.{group_name}.{spec.version}.{spec.kind}"
    return ".".join([*reversed(spec.group.split(".")), spec.version, spec.kind])


def _operation(spec: resources.ResourceSpec, action: str, *, body: Iterable[str] = (),
               field_validation: bool = False) -> dict[str, Any]:
    gvk = {"group": spec.group, "version": spec.version, "kind": spec.kind}
    ref = {"$ref": f"#/components/schemas/{_schema_name(spec)}"}
    operation: dict[str, Any] = {
        "operationId": f"{action}{spec.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "responses": {"200": {"description": "OK",
                              "content": {"application/json": {"schema": ref}}}},
    }
    if field_validation:
        operation["parameters"] = [{"name": "fieldValidation", "in": "query",
                                    "schema": {"type": "string", "uniqueItems": True}}]
    media = list(body)
    if media:
        operation["requestBody"] = {"content": {m: {"schema": ref} for m in media},
                                    "required": True}
    return operation


_PATCH_MEDIA = ("application/json-patch+json", "application/merge-patch+json",
                "application/apply-patch+yaml")


def openapi_document(registry: resources.Registry, path: str) -> dict[str, Any] | None:
    """``/openapi/v3/<path>`` (``api/v1``, ``apis/<group>/<version>``), or None."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"] and len(parts) == 2:
        group_name, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group_name, version = parts[1], parts[2]
    else:
        return None
    specs = _specs(registry, group_name, version)
    if not specs:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for spec in specs:
        base = "/" + _gv_path(group_name, version)
        collection = (f"{base}/namespaces/{{namespace}}/{spec.plural}" if spec.namespaced
                      else f"{base}/{spec.plural}")
        paths[collection] = {
            "get": _operation(spec, "list"),
            "post": _operation(spec, "post", body=("application/json",), field_validation=True),
        }
        paths[collection + "/{name}"] = {
            "get": _operation(spec, "get"),
            "put": _operation(spec, "put", body=("application/json",), field_validation=True),
            "patch": _operation(spec, "patch", body=_PATCH_MEDIA, field_validation=True),
            "delete": _operation(spec, "delete"),
        }
        gvk = [{"group": spec.group, "version": spec.version, "kind": spec.kind}]
        schema = dict(spec.schema) if spec.schema is not None else {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "description": f"{spec.kind} (the emulator publishes no schema for built-in kinds)"}
        schemas[_schema_name(spec)] = {**schema, "x-kubernetes-group-version-kind": gvk}
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes (kooper's emulator)", "version": "unversioned"},
            "paths": paths, "components": {"schemas": schemas}}
