"""The emulator's object store: the API server's write semantics, in memory.

Everything a controller relies on lives here, behind one lock:

* one global `resourceVersion` counter (like etcd's revision), bumped on
  every write and stamped on the written object;
* `uid`, `creationTimestamp`, `generation` (bumped only when something other
  than metadata and status changes);
* optimistic concurrency: a write whose body carries a stale
  `metadata.resourceVersion` fails with 409 Conflict;
* status subresource rules, the scale subresource;
* deletion with finalizers (`deletionTimestamp` first, removal when the last
  finalizer goes) and cascading garbage collection through `ownerReferences`;
* a bounded history of changes that watches replay from a resourceVersion.

Stored objects are never mutated in place: each write stores a new dict, so
the history, open watches and HTTP responses can share them without copies.
Callers outside the emulator get deep copies (see `cluster.EmulatedCluster`).
The store is synchronous and thread-safe; `watching.py` turns its change
feed into watch streams.
"""

import collections
import copy
import datetime
import random
import string
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kooper.emulator import errors, patches, resources, selectors

Obj = dict[str, Any]
Event = dict[str, Any]
Change = tuple[int, resources.ResourceSpec, str, Obj, Obj | None]
"""One recorded change: (resourceVersion, kind, ADDED|MODIFIED|DELETED, new object, old object)."""
Changes = list[Change]
Listener = Callable[[int, resources.ResourceSpec, str, Obj, Obj | None], None]
"""Called under the lock for each change: (rv, spec, type, new object, old object)."""

_EVENT_KINDS = ("events",)


def now_rfc3339() -> str:
    """The current UTC time, as Kubernetes writes timestamps."""
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _without(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def _get_path(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        child = node.get(part)
        node[part] = child = dict(child) if isinstance(child, Mapping) else {}
        node = child
    node[parts[-1]] = value


class Store:
    """All objects of all served kinds, with Kubernetes write semantics."""

    def __init__(
        self,
        registry: resources.Registry,
        *,
        history_limit: int = 20_000,
        event_limit: int = 1_000,
    ) -> None:
        self.registry = registry
        self.lock = threading.RLock()
        self._objects: dict[str, dict[tuple[str, str], Obj]] = collections.defaultdict(dict)
        self._by_uid: dict[str, tuple[resources.ResourceSpec, str, str]] = {}
        self._rv = 0
        self._history: collections.deque[Change] = collections.deque()
        self._history_limit = history_limit
        self._compacted = 0  # highest resourceVersion dropped from the history
        self._event_limit = event_limit
        self._listeners: list[Listener] = []
        self._specs: dict[str, resources.ResourceSpec] = {}

    # -- reading ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out (0 before the first write)."""
        return self._rv

    def get(self, spec: resources.ResourceSpec, namespace: str, name: str) -> Obj:
        """The stored object; raises a 404 `StatusFailure` when absent."""
        with self.lock:
            obj = self._objects[spec.key].get((self._ns(spec, namespace), name))
            if obj is None:
                raise errors.not_found(spec, name)
            return obj

    def list(
        self,
        spec: resources.ResourceSpec,
        namespace: str | None = None,
        labels: tuple[selectors.Requirement, ...] = (),
        fields: tuple[selectors.Requirement, ...] = (),
    ) -> tuple[list[Obj], int]:
        """Matching objects (all namespaces when `namespace` is None) and the current rv."""
        with self.lock:
            items = [
                obj for (ns, _), obj in self._objects[spec.key].items()
                if (namespace is None or not spec.namespaced or ns == namespace)
                and selectors.matches(obj, labels, fields)
            ]
            return items, self._rv

    def exists_uid(self, uid: str) -> bool:
        """Whether an object with this uid is stored (used by garbage collection)."""
        with self.lock:
            return uid in self._by_uid

    # -- the change feed --------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` under the lock for every change from now on."""
        with self.lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling `listener` (no error if it was not subscribed)."""
        with self.lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def history_since(
        self, spec: resources.ResourceSpec, since: int,
    ) -> Changes | None:
        """Changes of one kind newer than `since`; None if some were already compacted."""
        with self.lock:
            if since < self._compacted:
                return None
            return [entry for entry in self._history
                    if entry[0] > since and entry[1].key == spec.key]

    # -- writing ---------------------------------------------------------------------------

    def create(self, spec: resources.ResourceSpec, body: Mapping[str, Any],
               namespace: str | None = None) -> Obj:
        """Create an object; 409 AlreadyExists if the name is taken."""
        if not isinstance(body, Mapping):
            raise errors.bad_request("the request body must be a JSON object")
        obj: Obj = copy.deepcopy(dict(body))
        meta = dict(_meta(obj))
        name = meta.get("name")
        if not name and meta.get("generateName"):
            suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            name = f"{meta['generateName']}{suffix}"
        if not name:
            raise errors.invalid(spec, "", "metadata.name: Required value: name or generateName "
                                 "is required")
        body_ns = meta.get("namespace")
        if spec.namespaced:
            if namespace and body_ns and body_ns != namespace:
                raise errors.bad_request("the namespace of the provided object does not match "
                                         "the namespace sent on the request")
            ns = namespace or body_ns or "default"
            meta["namespace"] = ns
        else:
            ns = ""
            meta.pop("namespace", None)
        meta["name"] = name
        with self.lock:
            if (ns, name) in self._objects[spec.key]:
                raise errors.already_exists(spec, name)
            for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
                meta.pop(key, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            obj["metadata"] = meta
            obj["apiVersion"] = spec.api_version
            obj["kind"] = spec.kind
            if spec.status:
                obj.pop("status", None)  # status is written through /status only
            self._commit(spec, obj, "ADDED", None)
            if spec.plural in _EVENT_KINDS:
                self._trim_events(spec)
            return obj

    def replace(self, spec: resources.ResourceSpec, namespace: str, name: str,
                body: Mapping[str, Any], subresource: str | None = None) -> Obj:
        """PUT: replace the object (or its status/scale); 409 on a stale resourceVersion."""
        if not isinstance(body, Mapping):
            raise errors.bad_request("the request body must be a JSON object")
        with self.lock:
            old = self.get(spec, namespace, name)
            if subresource == "scale":
                return self._write_scale(spec, old, dict(body))
            body_name = _meta(body).get("name")
            if body_name and body_name != name:
                raise errors.bad_request(f"the name of the object ({body_name}) does not match "
                                         f"the name on the URL ({name})")
            return self._update(spec, old, dict(body), subresource)

    def patch(self, spec: resources.ResourceSpec, namespace: str, name: str, patch: Any, *,
              content_type: str, subresource: str | None = None) -> Obj:
        """PATCH with a JSON, merge or strategic-merge patch (the latter applied as merge)."""
        with self.lock:
            old = self.get(spec, namespace, name)
            current = self.scale_of(spec, old) if subresource == "scale" else old
            try:
                if content_type == "application/json-patch+json":
                    new = patches.json_patch(current, patch)
                elif isinstance(patch, Mapping):
                    new = patches.merge(current, patch)
                else:
                    raise patches.PatchError("a merge patch must be a JSON object", malformed=True)
            except patches.PatchError as exc:
                if exc.malformed:
                    raise errors.bad_request(str(exc)) from exc
                raise errors.invalid(spec, name, str(exc)) from exc
            if not isinstance(new, dict):
                raise errors.invalid(spec, name, "the patched object is not a JSON object")
            if subresource == "scale":
                return self._write_scale(spec, old, new)
            return self._update(spec, old, new, subresource)

    def apply(self, spec: resources.ResourceSpec, namespace: str, name: str,
              body: Mapping[str, Any], subresource: str | None = None) -> Obj:
        """A simplified server-side apply: create when absent, else merge (no field owners)."""
        with self.lock:
            try:
                self.get(spec, namespace, name)
            except errors.StatusFailure:
                if subresource is not None:
                    raise
                return self.create(spec, dict(body, metadata=dict(_meta(body), name=name)),
                                   namespace)
            return self.patch(spec, namespace, name, body,
                              content_type="application/merge-patch+json",
                              subresource=subresource)

    def delete(self, spec: resources.ResourceSpec, namespace: str, name: str, *,
               propagation: str = "Background",
               preconditions: Mapping[str, Any] | None = None) -> Obj:
        """Delete: mark for deletion if finalizers remain, else remove and collect dependents."""
        with self.lock:
            obj = self.get(spec, namespace, name)
            meta = _meta(obj)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise errors.conflict(spec, name, f"Precondition failed: UID in precondition: "
                                      f"{pre['uid']}, UID in object meta: {meta.get('uid')}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(spec, name)
            if spec.key == "v1/namespaces":
                self._delete_namespace_contents(name)
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return obj  # already being deleted: nothing changes
                new = copy.deepcopy(obj)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                new["metadata"]["generation"] = meta.get("generation", 1) + 1
                return self._commit(spec, new, "MODIFIED", obj)
            return self._remove(spec, obj, orphan=propagation == "Orphan")

    # -- scale subresource -------------------------------------------------------------------

    def scale_of(self, spec: resources.ResourceSpec, obj: Mapping[str, Any]) -> Obj:
        """The autoscaling/v1 Scale view of an object with a scale subresource."""
        meta = _meta(obj)
        scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                           "creationTimestamp") if k in meta}
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": scale_meta,
            "spec": {"replicas": _get_path(obj, spec.spec_replicas_path) or 0},
            "status": {"replicas": _get_path(obj, spec.status_replicas_path) or 0},
        }

    def _write_scale(self, spec: resources.ResourceSpec, old: Obj, scale: Mapping[str, Any]
                     ) -> Obj:
        name = _meta(old)["name"]
        stale = _meta(scale).get("resourceVersion")
        if stale and stale != _meta(old)["resourceVersion"]:
            raise errors.conflict(spec, name)
        replicas = _get_path(scale, "spec.replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid(spec, name, "spec.replicas: must be a non-negative integer")
        new = copy.deepcopy(old)
        _set_path(new, spec.spec_replicas_path, replicas)
        self._update(spec, old, new, None)
        return self.scale_of(spec, self.get(spec, _meta(old).get("namespace", ""), name))

    # -- internals -------------------------------------------------------------------------

    @staticmethod
    def _ns(spec: resources.ResourceSpec, namespace: str | None) -> str:
        return (namespace or "default") if spec.namespaced else ""

    def _update(self, spec: resources.ResourceSpec, old: Obj, body: dict[str, Any],
                subresource: str | None) -> Obj:
        old_meta = _meta(old)
        name = old_meta["name"]
        stale = _meta(body).get("resourceVersion")
        if stale and stale != old_meta["resourceVersion"]:
            raise errors.conflict(spec, name)
        if subresource == "status":
            # Only the status stanza changes through /status.
            new = _without(old, "status")
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
        elif subresource is None:
            new = copy.deepcopy(body)
            if spec.status:  # the main endpoint ignores status changes
                new.pop("status", None)
                if "status" in old:
                    new["status"] = old["status"]
            meta = dict(_meta(new))
            # Fields that only the server sets survive any update unchanged.
            for key in ("uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation", "resourceVersion",
                        "namespace", "name"):
                meta.pop(key, None)
                if key in old_meta:
                    meta[key] = old_meta[key]
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    raise errors.invalid(spec, name, "metadata.finalizers: Forbidden: no new "
                                         "finalizers can be added if the object is being deleted")
            new["metadata"] = meta
            new["apiVersion"] = spec.api_version
            new["kind"] = spec.kind
            if _without(new, "metadata", "status") != _without(old, "metadata", "status"):
                meta["generation"] = old_meta.get("generation", 1) + 1
        else:
            raise errors.StatusFailure(404, "NotFound", f"the server could not find the requested "
                                  f"resource ({subresource} of {spec.plural})", spec=spec)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no watch event (as in Kubernetes)
        meta = _meta(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # The last finalizer is gone: the object goes at once, in one DELETED event.
            return self._remove(spec, new, orphan=False)
        return self._commit(spec, new, "MODIFIED", old)

    def _commit(self, spec: resources.ResourceSpec, obj: Obj, kind: str, old: Obj | None
                ) -> Obj:
        """Stamp a new resourceVersion, store, record and announce one change."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if kind == "DELETED":
            self._objects[spec.key].pop(key, None)
            self._by_uid.pop(obj["metadata"]["uid"], None)
        else:
            self._specs[spec.key] = spec
            self._objects[spec.key][key] = obj
            self._by_uid[obj["metadata"]["uid"]] = (spec, *key)
        self._history.append((self._rv, spec, kind, obj, old))
        if len(self._history) > self._history_limit:
            self._compacted = self._history.popleft()[0]
        for listener in list(self._listeners):
            listener(self._rv, spec, kind, obj, old)
        return obj

    def _remove(self, spec: resources.ResourceSpec, obj: Obj, *, orphan: bool) -> Obj:
        meta = _meta(obj)
        gone = copy.deepcopy(obj)
        self._commit(spec, gone, "DELETED", obj)
        self._collect_dependents(meta["uid"], orphan=orphan)
        return gone

    def _collect_dependents(self, owner_uid: str, *, orphan: bool) -> None:
        """Garbage collection: delete (or orphan) every object owned by a removed owner."""
        dependents = [
            (spec_key, obj) for spec_key, objs in self._objects.items() for obj in objs.values()
            if any(ref.get("uid") == owner_uid for ref in _meta(obj).get("ownerReferences") or [])
        ]
        for spec_key, obj in dependents:
            spec = self._spec_of(spec_key)
            meta = _meta(obj)
            current = self._objects[spec_key].get((meta.get("namespace", ""), meta["name"]))
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                continue  # already collected through another owner
            refs = [ref for ref in meta.get("ownerReferences") or []
                    if ref.get("uid") != owner_uid]
            if orphan or any(ref.get("uid") in self._by_uid for ref in refs):
                new = copy.deepcopy(current)
                new["metadata"]["ownerReferences"] = refs
                if not refs:
                    del new["metadata"]["ownerReferences"]
                self._commit(spec, new, "MODIFIED", current)
            else:
                self.delete(spec, meta.get("namespace", ""), meta["name"])

    def _delete_namespace_contents(self, namespace: str) -> None:
        for spec_key, objs in list(self._objects.items()):
            spec = self._spec_of(spec_key)
            if not spec.namespaced:
                continue
            for (ns, name) in list(objs):
                if ns == namespace and (ns, name) in objs:
                    self.delete(spec, ns, name)

    def _trim_events(self, spec: resources.ResourceSpec) -> None:
        # Events expire in a real cluster (1h TTL); here the oldest go once over the limit.
        objs = self._objects[spec.key]
        while len(objs) > self._event_limit:
            oldest = next(iter(objs.values()))
            self._remove(spec, oldest, orphan=False)

    def _spec_of(self, spec_key: str) -> resources.ResourceSpec:
        return self._specs[spec_key]
