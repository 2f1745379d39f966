"""A tiny urllib client for the emulator tests (the SDK has its own; this one is for tests)."""

import json
import urllib.error
import urllib.request
from typing import Any

CM = "/api/v1/namespaces/default/configmaps"
WG = "/apis/kooper.dev/v1alpha1/namespaces/default/workergroups"
CONN = "/apis/kooper.dev/v1alpha1/namespaces/default/connectors"
PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


class Api:
    """Plain HTTP calls against the emulator, answering (status code, decoded body)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def call(self, method: str, path: str, body: Any = None,
             content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def get(self, path: str) -> tuple[int, Any]:
        return self.call("GET", path)

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return self.call("POST", path, body)

    def put(self, path: str, body: Any) -> tuple[int, Any]:
        return self.call("PUT", path, body)

    def merge(self, path: str, body: Any) -> tuple[int, Any]:
        return self.call("PATCH", path, body, "application/merge-patch+json")

    def json_patch(self, path: str, ops: Any) -> tuple[int, Any]:
        return self.call("PATCH", path, ops, "application/json-patch+json")

    def delete(self, path: str, body: Any = None) -> tuple[int, Any]:
        return self.call("DELETE", path, body)

    def watch(self, path: str, *, count: int | None = None, timeout: float = 5.0
              ) -> list[dict[str, Any]]:
        """Read watch events until `count` arrived or the server ends the stream."""
        events: list[dict[str, Any]] = []
        with urllib.request.urlopen(self.base_url + path, timeout=timeout) as response:
            while count is None or len(events) < count:
                line = response.readline()
                if not line:
                    break
                events.append(json.loads(line))
        return events
