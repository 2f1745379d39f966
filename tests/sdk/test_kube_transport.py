"""The stdlib Kubernetes client against a tiny fake HTTP server; identity from the env."""

import http.server
import json
import threading
import typing

import pytest

from kooper.sdk import apierrors, identity, kube, wire


class FakeApi(http.server.BaseHTTPRequestHandler):
    seen: typing.ClassVar[list] = []

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        FakeApi.seen.append((self.command, self.path, dict(self.headers), body))
        extra = {}
        if self.path.startswith("/missing"):
            payload, code = {"kind": "Status", "message": "leases \"x\" not found"}, 404
        elif self.path.startswith("/unauthorized-once") and len(
                [s for s in FakeApi.seen if s[1] == self.path]) == 1:
            payload, code = {"kind": "Status", "reason": "Unauthorized"}, 401
        elif self.path.startswith("/throttled-twice") and len(
                [s for s in FakeApi.seen if s[1] == self.path]) <= 2:
            payload, code = {"kind": "Status", "reason": "TooManyRequests"}, 429
            extra = {"Retry-After": "2"}
        else:
            payload, code = {"ok": True, "echo": body}, 200
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra.items():
            self.send_header(key, value)
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
    assert (method, path) == ("PATCH", "/x?fieldManager=kooper-worker")
    assert headers["Content-Type"] == kube.MERGE_PATCH
    assert "Authorization" not in headers


def test_a_token_file_is_sent_as_a_bearer_token_and_reread_after_a_401(server, tmp_path):
    token = tmp_path / "token"
    token.write_text("one\n")
    api = kube.Api(server, token_file=token)
    api.get("/a")
    token.write_text("two")
    api.get("/unauthorized-once")
    assert [h["Authorization"] for _, _, h, _ in FakeApi.seen] == [
        "Bearer one", "Bearer one", "Bearer two"]


def test_every_request_names_kooper_and_every_write_its_field_manager(server):
    api = kube.Api(server)
    api.get("/a")
    api.create("/b", {"x": 1})
    (_, get_path, get_headers, _), (_, post_path, post_headers, _) = FakeApi.seen
    assert get_path == "/a"
    assert post_path == "/b?fieldManager=kooper-worker"
    assert get_headers["User-Agent"].startswith("kooper/")
    assert post_headers["User-Agent"] == get_headers["User-Agent"]


def test_a_429_waits_the_servers_retry_after_then_resends(server):
    slept: list[float] = []
    answer = kube.Api(server, sleep=slept.append).get("/throttled-twice")
    assert answer["ok"] is True
    assert slept == [2.0, 2.0]
    assert [p for _, p, _, _ in FakeApi.seen] == ["/throttled-twice"] * 3


def test_an_http_error_becomes_its_class_of_the_one_family_with_the_status_message(server):
    with pytest.raises(apierrors.NotFound, match='404 leases "x" not found') as caught:
        kube.Api(server).delete("/missing")
    assert caught.value.status == 404


def test_an_unreachable_api_is_an_api_error_with_status_zero():
    with pytest.raises(apierrors.Unreachable) as caught:
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
    built = wire.build_request(
        "PATCH", wire.custom_resource_path("workergroups", "ns", "wg") + "/status",
        role="operator", body={"status": {"a": 1}}, content_type=wire.MERGE_PATCH,
        query={"labelSelector": "a=b"}, authorization="Bearer t0k")
    assert built.target == "/apis/kooper.dev/v1alpha1/namespaces/ns/workergroups/wg/status" \
        "?labelSelector=a%3Db&fieldManager=kooper-operator"
    assert built.body == b'{"status":{"a":1}}'
    assert built.headers == {"Accept": "application/json", "Content-Type": wire.MERGE_PATCH,
                             "Authorization": "Bearer t0k",
                             "User-Agent": wire.user_agent("operator")}
    assert "fieldManager" not in wire.build_request("DELETE", "/x", role="worker").target
    assert wire.decode_answer(b"") == {}
    assert wire.decode_answer(b"nope") is None


@pytest.mark.parametrize(("status", "cls"), [
    (0, apierrors.Unreachable), (401, apierrors.Unauthorized), (403, apierrors.Forbidden),
    (404, apierrors.NotFound), (409, apierrors.Conflict), (410, apierrors.Gone),
    (422, apierrors.Invalid), (429, apierrors.TooManyRequests), (400, apierrors.ClientError),
    (503, apierrors.ServerError),
])
def test_each_status_has_one_class_and_status_is_an_int(status, cls):
    error = wire.failure("GET", "/x", status, b'{"message":"m","reason":"R"}')
    assert type(error) is cls
    assert (error.status, error.reason, str(error)) == (status, "R", f"GET /x: {status} m")


def test_retry_after_reads_seconds_and_dates_and_is_capped():
    assert wire.retry_after_s("3") == 3.0
    assert wire.retry_after_s("86400") == wire.MAX_RETRY_AFTER_S
    assert wire.retry_after_s("Wed, 21 Oct 2015 07:28:05 GMT", now=1445412480.0) == 5.0
    assert wire.retry_after_s("soon") is None
    assert wire.retry_after_s(None) is None


def test_backoff_is_jittered_below_its_exponential_ceiling():
    import random

    rng = random.Random(7)
    delays = [wire.backoff_s(3, base_s=0.1, cap_s=5.0, rng=rng) for _ in range(200)]
    assert all(0 <= d <= 0.8 for d in delays)
    assert len(set(delays)) == 200
    assert max(wire.backoff_s(40, base_s=0.1, cap_s=5.0, rng=rng) for _ in range(50)) <= 5.0


def test_a_keep_alive_connection_is_reused_across_requests():
    class KeepAlive(FakeApi):
        protocol_version = "HTTP/1.1"
        peers: typing.ClassVar[set] = set()

        def _handle(self):
            KeepAlive.peers.add(self.client_address)
            super()._handle()

        do_GET = do_POST = _handle

    FakeApi.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        api = kube.Api(f"http://127.0.0.1:{httpd.server_address[1]}")
        for _ in range(5):
            api.get("/a")
        assert len(FakeApi.seen) == 5
        assert len(KeepAlive.peers) == 1
    finally:
        httpd.shutdown()


@pytest.mark.parametrize(("url", "env", "proxy"), [
    ("https://10.96.0.1:443", {"HTTPS_PROXY": "http://p:3128"}, "http://p:3128"),
    ("https://10.96.0.1:443", {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:1"},
     "http://low:1"),
    ("https://10.96.0.1:443", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.96.0.0/12"},
     None),
    ("https://api.cluster.local:6443", {"HTTPS_PROXY": "http://p", "no_proxy": ".local"}, None),
    ("https://api.cluster.local:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "cluster.local"},
     None),
    ("https://api.example:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "api.example:443"},
     "http://p"),
    ("https://api.example:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "*"}, None),
    ("http://api.example:8080", {"HTTPS_PROXY": "http://p"}, None),
    ("http://api.example:8080", {"HTTP_PROXY": "http://p"}, "http://p"),
    # Go's httpproxy never proxies localhost or a loopback address (kind's API server
    # at 127.0.0.1 with a corporate HTTPS_PROXY: kubectl connects directly).
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://p"}, None),
    ("https://127.8.9.10:6443", {"HTTPS_PROXY": "http://p"}, None),
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p"}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": "http://p"}, None),
    ("http://127.0.0.1:8080", {"HTTP_PROXY": "http://p"}, None),
    # Go's httpproxy takes a proxy without a scheme as http:// (aiohttp refuses the bare
    # "proxy.corp:3128" as an invalid URL).
    ("https://api.example:6443", {"HTTPS_PROXY": "proxy.corp:3128"}, "http://proxy.corp:3128"),
    ("https://api.example:6443", {"https_proxy": "10.0.0.9:3128"}, "http://10.0.0.9:3128"),
    # NO_PROXY entries as Go's httpproxy parses them: "*.domain", "[IPv6]:port", and a
    # port compared with the URL's default one when the URL names none (EKS, GKE).
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "*.corp.example"},
     None),
    ("https://[fd00::1]:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "[fd00::1]:6443"}, None),
    ("https://[fd00::1]:6443", {"HTTPS_PROXY": "http://p", "NO_PROXY": "[fd00::1]:443"},
     "http://p"),
    ("https://eks.example", {"HTTPS_PROXY": "http://p", "NO_PROXY": "eks.example:443"}, None),
])
def test_one_proxy_rule_for_requests_and_watches(url, env, proxy):
    from kooper.sdk import connection

    assert connection.proxy_for(url, env) == proxy


def test_a_kubeconfig_proxy_url_wins_over_the_environment_and_no_proxy(server):
    from kooper.sdk import connection

    # The API server's name resolves nowhere: only the proxy (the fake API here, which
    # sees the absolute URL a plain HTTP proxy is sent) can answer.
    conn = connection.Connection(server="http://api.invalid:8080", proxy_url=server)
    env = {"HTTP_PROXY": "http://elsewhere.invalid:1", "NO_PROXY": "*"}
    assert connection.proxy_of(conn, conn.server, env) == server
    assert kube.Api(conn, env=env).get("/api/v1/pods") == {"ok": True, "echo": None}
    assert FakeApi.seen[-1][1] == "http://api.invalid:8080/api/v1/pods"
    plain = connection.Connection(server="http://api.invalid:8080")
    assert connection.proxy_of(plain, plain.server, env) is None  # NO_PROXY: *


def test_a_pod_without_its_service_account_token_names_the_token_file(tmp_path):
    """client-go's in-cluster config, with the service variables set, fails reading the
    token file and names it; "not in a cluster" would send the reader the wrong way (a
    pod with automountServiceAccountToken: false is in a cluster)."""
    from kooper.sdk import connection

    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(connection.NoCredentialsError) as caught:
        connection.discover(env, root=tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "token") in message
    assert "automountServiceAccountToken" in message
    assert "not in a cluster" not in message
