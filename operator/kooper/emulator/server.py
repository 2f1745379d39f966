"""The HTTP face of the emulator: a kmock handler that serves the store.

`ApiHandler` extends kmock's `KubernetesScaffold`, which keeps doing what it
does well: API discovery (/api, /apis, group and version documents built
from `kmock.ResourceInfo` records), `Status`-shaped errors, and the kmock DSL
for any extra endpoint a test wants (`handler['get /healthz'] << b'ok'`).

Resource URLs (anything with a plural) bypass kmock's request parsing and
matching and go straight to the store, for three reasons found the hard
way: kmock 0.8's path parser fails on `/api/v1/namespaces` (the first URL
kopf lists); its emulator has no resourceVersion, PUT, JSON-patch `test` or
status-subresource semantics; and it records every request and matches new
ones against that log, which grows without bound in a long-running cluster.
Discovery and OpenAPI v3 come from `discovery` (kmock's discovery names the
core group "/v1", which kubectl cannot resolve); a GET that asks for a Table
(kubectl's human-readable `get`) is answered by `tables`; `fieldValidation`
is honoured by `validation`. The few requests that still go through kmock
(`/version`, DSL endpoints) are trimmed to `request_log_limit`.
"""

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml

from kooper.emulator import (
    discovery,
    errors,
    faults,
    resources,
    selectors,
    store,
    tables,
    validation,
    watching,
)

logger = logging.getLogger(__name__)

_PATCH_TYPES = frozenset({
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+json",
})


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """A resource URL split into its parts."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_route(path: str) -> Route | None:
    """Split `/api/v1/...` or `/apis/g/v/...`; None for discovery and other paths."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    # /namespaces/{ns}/{plural}/... but not /namespaces/{name}/status (a namespace's status).
    if rest[0] == "namespaces" and len(rest) >= 3 and not (
            len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return None
    return Route(group, version, rest[0], namespace,
                 rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)


def _verb(method: str, route: Route, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else "get" if route.name else "list"
    return {
        "POST": "create", "PUT": "update", "PATCH": "patch",
        "DELETE": "delete" if route.name else "deletecollection",
    }.get(method, method.lower())


def _status_success(spec: resources.ResourceSpec, name: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": spec.group, "kind": spec.plural}}


async def _answer(response: aiohttp.web.StreamResponse) -> aiohttp.web.StreamResponse:
    return response


@attrs.define(kw_only=True, eq=False)
class ApiHandler(kmock.KubernetesScaffold):
    """The aiohttp request handler: store-backed resources plus kmock discovery."""

    registry: resources.Registry
    objects: store.Store
    hub: watching.WatchHub
    faults: faults.Faults
    request_log_limit: int = 1000
    counts: dict[str, int] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for spec in self.registry:
            self.declare(spec)

    def declare(self, spec: resources.ResourceSpec) -> None:
        """Make a kind discoverable (the store serves any kind in the registry)."""
        key = kmock.resource(group=spec.group, version=spec.version, plural=spec.plural)
        self.resources[key] = kmock.ResourceInfo(
            namespaced=spec.namespaced, kind=spec.kind, singular=spec.singular,
            verbs=set(spec.verbs), shortnames=set(spec.short_names),
            categories=set(spec.categories), subresources=set(spec.subresources))

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        route = parse_route(raw.path)
        if route is None and raw.method == "GET":
            described = self._describe(raw.path)
            if described is not None:
                return await self._delayed(None, _answer(described))
        if route is None:
            try:
                return await self._delayed(None, super().__call__(raw))
            finally:
                self._trim_log()
        spec = self.registry.find(route.group, route.version, route.plural)
        try:
            if spec is None:
                raise errors.StatusFailure(404, "NotFound", "the server could not find the "
                                           f"requested resource ({raw.path})")
            return await self._delayed(spec.key, self._serve(raw, spec, route))
        except errors.StatusFailure as exc:
            return aiohttp.web.json_response(exc.status(), status=exc.code)
        except Exception as exc:  # a bug here must reach the client, not kill the server
            logger.exception("emulator failed on %s %s", raw.method, raw.path_qs)
            return aiohttp.web.json_response(
                errors.StatusFailure(500, "InternalError", repr(exc)).status(), status=500)

    def _describe(self, path: str) -> aiohttp.web.StreamResponse | None:
        """Discovery and OpenAPI v3 documents; None for any other path."""
        parts = [p for p in path.split("/") if p]
        document: dict[str, Any] | None
        if parts == ["api"]:
            document = discovery.core_versions()
        elif parts == ["apis"]:
            document = discovery.group_list(self.registry)
        elif len(parts) == 2 and parts[0] == "api":
            document = discovery.resource_list(self.registry, "", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            document = discovery.group(self.registry, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            document = discovery.resource_list(self.registry, parts[1], parts[2])
        elif parts == ["openapi", "v3"]:
            document = discovery.openapi_index(self.registry)
        elif parts[:2] == ["openapi", "v3"]:
            document = discovery.openapi_document(self.registry, "/".join(parts[2:]))
        else:
            return None
        if document is None:
            error = errors.StatusFailure(404, "NotFound", "the server could not find the requested "
                                    f"resource ({path})")
            return aiohttp.web.json_response(error.status(), status=404)
        return aiohttp.web.json_response(document)

    async def _delayed(self, key: str | None,
                       answer: Coroutine[Any, Any, aiohttp.web.StreamResponse],
                       ) -> aiohttp.web.StreamResponse:
        delay = self.faults.delay_for(key)
        if delay:
            try:
                await asyncio.sleep(delay)
            except BaseException:
                answer.close()  # the client went away meanwhile: never started, so closed
                raise
        return await answer

    def _trim_log(self) -> None:
        # kmock keeps every request (and every error) it saw: bound them for long runs.
        limit = self.request_log_limit
        if len(self._requests) > limit:
            del self._requests[: len(self._requests) - limit]
        for payload in self._payloads:
            if len(payload._requests) > limit:
                del payload._requests[: len(payload._requests) - limit]
        for level in self._errors:
            if len(level) > limit:
                del level[: len(level) - limit]

    async def _serve(self, raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec,
                     route: Route) -> aiohttp.web.StreamResponse:
        query = raw.query
        watch = query.get("watch") in ("true", "1")
        verb = _verb(raw.method, route, watch)
        self.counts[verb] = self.counts.get(verb, 0) + 1
        code = self.faults.take_failure(spec.key, verb)
        if code is not None:
            reason = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError",
                      503: "ServiceUnavailable", 422: "Invalid"}.get(code, "Injected")
            raise errors.StatusFailure(code, reason, f"injected fault: {verb} {spec.plural}",
                                  spec=spec, name=route.name)
        if route.subresource and route.subresource not in spec.subresources:
            raise errors.StatusFailure(404, "NotFound", f"the server could not find the requested "
                                  f"resource ({route.subresource} of {spec.plural})", spec=spec)
        namespace = route.namespace if spec.namespaced else None
        name = route.name
        if raw.method == "GET" and watch:
            return await self._watch(raw, spec, namespace, name)
        if raw.method == "GET" and name is None:
            return self._list(raw, spec, namespace)
        if raw.method == "GET" and name is not None:
            obj = self.objects.get(spec, namespace or "", name)
            if route.subresource == "scale":
                obj = self.objects.scale_of(spec, obj)
            elif tables.wants_table(raw.headers.get("Accept", "")):
                return aiohttp.web.json_response(self._table(raw, spec, [obj], str(
                    obj.get("metadata", {}).get("resourceVersion", ""))))
            return aiohttp.web.json_response(obj)
        if "dryRun" in query:
            raise errors.bad_request("dryRun is not supported by kooper's emulator (it would "
                                     "write): use the real local control plane")
        body = await self._body(raw)
        warnings = self._check_fields(raw, spec, route, body)
        answer = await self._write(raw, spec, route, namespace, body)
        for warning in warnings:
            answer.headers.add("Warning", f'299 - "{warning}"')
        return answer

    def _table(self, raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec,
               objects: list[store.Obj], resource_version: str,
               headers: bool = True) -> dict[str, Any]:
        return tables.table(spec, objects, now=time.time(), resource_version=resource_version,
                            include_object=raw.query.get("includeObject", "Metadata"),
                            headers=headers)

    @staticmethod
    def _check_fields(raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec, route: Route,
                      body: Any) -> list[str]:
        """``?fieldValidation=Strict`` refuses unknown fields (400), ``Warn`` names them."""
        mode = raw.query.get("fieldValidation", "")
        if mode not in ("Strict", "Warn") or spec.schema is None or route.subresource or (
                raw.content_type == "application/json-patch+json"):
            return []
        unknown = validation.unknown_fields(spec.schema, body)
        if not unknown:
            return []
        if mode == "Strict":
            raise errors.bad_request(validation.strict_error(spec.kind, spec.version, unknown))
        return [f'unknown field \\"{f}\\"' for f in unknown]

    async def _write(self, raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec,
                     route: Route, namespace: str | None,
                     body: Any) -> aiohttp.web.StreamResponse:
        query = raw.query
        name = route.name
        if raw.method == "POST" and name is None:
            return aiohttp.web.json_response(self.objects.create(spec, body, namespace),
                                             status=201)
        if raw.method == "PUT" and name is not None:
            return aiohttp.web.json_response(
                self.objects.replace(spec, namespace or "", name, body, route.subresource))
        if raw.method == "PATCH" and name is not None:
            content_type = raw.content_type
            if content_type not in _PATCH_TYPES:
                raise errors.StatusFailure(415, "UnsupportedMediaType",
                                      f"the body of the request was in an unknown format - "
                                      f"accepted media types include: {sorted(_PATCH_TYPES)}")
            if content_type.startswith("application/apply-patch"):
                obj = self.objects.apply(spec, namespace or "", name, body, route.subresource)
            else:
                obj = self.objects.patch(spec, namespace or "", name, body,
                                         content_type=content_type,
                                         subresource=route.subresource)
            return aiohttp.web.json_response(obj)
        if raw.method == "DELETE":
            options = body if isinstance(body, dict) else {}
            propagation = query.get("propagationPolicy") or options.get("propagationPolicy")
            if name is None:
                return self._delete_collection(raw, spec, namespace, propagation)
            obj = self.objects.delete(spec, namespace or "", name,
                                      propagation=propagation or "Background",
                                      preconditions=options.get("preconditions"))
            return aiohttp.web.json_response(obj)
        raise errors.StatusFailure(405, "MethodNotAllowed",
                              f"{raw.method} is not supported on {raw.path}")

    @staticmethod
    async def _body(raw: aiohttp.web.BaseRequest) -> Any:
        data = await raw.read()
        if not data:
            return {}
        if raw.content_type in ("application/vnd.kubernetes.protobuf", "application/cbor"):
            # kubectl sends protobuf for built-in kinds first and falls back to JSON on a 415.
            raise errors.StatusFailure(415, "UnsupportedMediaType",
                                  f"the body of the request was in an unknown format - "
                                  f"accepted media types include: application/json, "
                                  f"{', '.join(sorted(_PATCH_TYPES))}")
        try:
            if raw.content_type == "application/apply-patch+yaml":
                return yaml.safe_load(data)
            return json.loads(data)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the request body is not valid: {exc}") from exc

    @staticmethod
    def _selectors(raw: aiohttp.web.BaseRequest, name: str | None = None
                   ) -> tuple[tuple[selectors.Requirement, ...], tuple[selectors.Requirement, ...]]:
        try:
            labels = selectors.parse_labels(raw.query.get("labelSelector"))
            fields = selectors.parse_fields(raw.query.get("fieldSelector"))
        except selectors.SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc
        if name is not None:
            fields = (*fields, selectors.Requirement("metadata.name", "=", frozenset([name])))
        return labels, fields

    def _list(self, raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec,
              namespace: str | None) -> aiohttp.web.StreamResponse:
        labels, fields = self._selectors(raw)
        items, rv = self.objects.list(spec, namespace, labels, fields)
        if tables.wants_table(raw.headers.get("Accept", "")):
            return aiohttp.web.json_response(self._table(raw, spec, items, str(rv)))
        return aiohttp.web.json_response({
            "kind": f"{spec.kind}List", "apiVersion": spec.api_version,
            "metadata": {"resourceVersion": str(rv)}, "items": items,
        })

    def _delete_collection(self, raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec,
                           namespace: str | None, propagation: str | None
                           ) -> aiohttp.web.StreamResponse:
        labels, fields = self._selectors(raw)
        deleted: list[store.Obj] = []
        with self.objects.lock:
            items, _ = self.objects.list(spec, namespace, labels, fields)
            for obj in items:
                meta = obj["metadata"]
                try:
                    deleted.append(self.objects.delete(
                        spec, meta.get("namespace", ""), meta["name"],
                        propagation=propagation or "Background"))
                except errors.StatusFailure:
                    continue  # collected as a dependent of an earlier item
            _, rv = self.objects.list(spec, namespace, labels, fields)
        return aiohttp.web.json_response({
            "kind": f"{spec.kind}List", "apiVersion": spec.api_version,
            "metadata": {"resourceVersion": str(rv)}, "items": deleted,
        })

    async def _watch(self, raw: aiohttp.web.BaseRequest, spec: resources.ResourceSpec,
                     namespace: str | None, name: str | None) -> aiohttp.web.StreamResponse:
        labels, fields = self._selectors(raw, name)
        timeout_text = raw.query.get("timeoutSeconds")
        try:
            timeout = float(timeout_text) if timeout_text else None
        except ValueError as exc:
            raise errors.bad_request(f"invalid timeoutSeconds: {timeout_text!r}") from exc
        watch = watching.Watch(self.objects, spec, loop=asyncio.get_running_loop(),
                               namespace=namespace, labels=labels, fields=fields)
        watch.start(raw.query.get("resourceVersion"),
                    send_initial_events=raw.query.get("sendInitialEvents") == "true")
        self.hub.add(watch)
        response = aiohttp.web.StreamResponse(
            status=200, headers={"Content-Type": "application/json"})
        as_table = tables.wants_table(raw.headers.get("Accept", ""))
        headers = True
        try:
            await response.prepare(raw)
            async for event in watch.events(timeout):
                sent = event
                if as_table and event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    obj = event["object"]
                    rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
                    sent = {"type": event["type"],
                            "object": self._table(raw, spec, [obj], rv, headers=headers)}
                    headers = False  # kubectl prints the header once, from the first event
                await response.write(json.dumps(sent).encode() + b"\n")
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away
        finally:
            self.hub.discard(watch)
            watch.close()
        return response
