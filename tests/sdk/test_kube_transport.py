"""The stdlib Kubernetes client against a tiny fake HTTP server; identity from the env."""

import http.server
import json
import threading
import typing

import pytest

from kooper.sdk import identity, kube


class FakeApi(http.server.BaseHTTPRequestHandler):
    seen: typing.ClassVar[list] = []

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        FakeApi.seen.append((self.command, self.path, dict(self.headers), body))
        if self.path.startswith("/missing"):
            payload, code = {"kind": "Status", "message": "leases \"x\" not found"}, 404
        else:
            payload, code = {"ok": True, "echo": body}, 200
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _handle

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    FakeApi.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_merge_patch_sends_json_with_the_merge_content_type(server):
    api = kube.Api(server)
    answer = api.merge_patch("/x", {"spec": {"a": 1}})
    assert answer == {"ok": True, "echo": {"spec": {"a": 1}}}
    method, path, headers, _body = FakeApi.seen[-1]
    assert (method, path) == ("PATCH", "/x")
    assert headers["Content-Type"] == kube.MERGE_PATCH
    assert "Authorization" not in headers


def test_a_token_file_is_sent_as_a_bearer_token_and_reread_each_time(server, tmp_path):
    token = tmp_path / "token"
    token.write_text("one\n")
    api = kube.Api(server, token_file=token)
    api.get("/a")
    token.write_text("two")
    api.get("/b")
    assert [h["Authorization"] for _, _, h, _ in FakeApi.seen] == ["Bearer one", "Bearer two"]


def test_an_http_error_becomes_an_api_error_with_the_status_message(server):
    with pytest.raises(kube.ApiError, match='404 leases "x" not found') as caught:
        kube.Api(server).delete("/missing")
    assert caught.value.status == 404


def test_an_unreachable_api_is_an_api_error_with_status_zero():
    with pytest.raises(kube.ApiError) as caught:
        kube.Api("http://127.0.0.1:9", timeout_s=1).get("/x")
    assert caught.value.status == 0


def test_from_env_prefers_the_emulator_url_without_credentials():
    api = kube.Api.from_env({"KOOPER_KUBE_API": "http://127.0.0.1:1234/"})
    assert api.base_url == "http://127.0.0.1:1234"
    assert api.token_file is None


def test_from_env_outside_a_cluster_says_what_is_missing():
    with pytest.raises(kube.NoCredentialsError, match="KOOPER_KUBE_API is not set"):
        kube.Api.from_env({})


def test_identity_comes_from_the_downward_api():
    who = identity.from_env({"POD_NAME": "w-1", "POD_NAMESPACE": "ns", "POD_UID": "u"})
    assert (who.pod, who.namespace, who.uid, who.lease_name) == ("w-1", "ns", "u", "kooper-w-1")


def test_missing_identity_names_every_missing_variable_and_the_fix():
    with pytest.raises(identity.IdentityError) as caught:
        identity.from_env({})
    message = str(caught.value)
    assert "POD_NAME is not set" in message
    assert "POD_NAMESPACE is not set" in message
    assert "fieldRef metadata.name" in message


def test_the_operator_and_the_worker_build_requests_with_the_one_builder():
    from kooper.sdk import kube as sdk_kube

    built = sdk_kube.build_request(
        "PATCH", sdk_kube.custom_resource_path("workergroups", "ns", "wg") + "/status",
        body={"status": {"a": 1}}, content_type=sdk_kube.MERGE_PATCH,
        query={"labelSelector": "a=b"}, token="t0k")
    assert built.target == "/apis/kooper.dev/v1alpha1/namespaces/ns/workergroups/wg/status" \
        "?labelSelector=a%3Db"
    assert built.body == b'{"status":{"a":1}}'
    assert built.headers == {"Accept": "application/json", "Content-Type": sdk_kube.MERGE_PATCH,
                             "Authorization": "Bearer t0k"}
    assert sdk_kube.build_request("GET", "/x").headers == {"Accept": "application/json"}
    assert sdk_kube.error_message(b'{"kind":"Status","message":"gone"}', "Not Found") == "gone"
    assert sdk_kube.error_message(b"<html>", "Not Found") == "Not Found"
    assert sdk_kube.decode_answer(b"") == {}
    assert sdk_kube.decode_answer(b"nope") is None
