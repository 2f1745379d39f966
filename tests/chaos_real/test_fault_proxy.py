"""The fault proxy (e2e/fault_proxy.py) in front of a tiny local API server.

The upstream is a plain aiohttp server in a thread of its own that records what
reaches it and streams a watch one event at a time, when the test says so. The
clients are the worker SDK's REST client (``kooper.sdk.kube.Api``) over TLS, trusting
the CA the proxy minted its certificate from: what the workers of the real chaos run
do. Every wait is on an event (a request reaching the upstream, a request held by
the proxy), never on the clock.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from concurrent import futures

import aiohttp
import aiohttp.web
import pytest
from e2e import fault_proxy

from kooper.sdk import apierrors, kube

TIMEOUT_S = 30


class Upstream:
    """A tiny API server: records requests; ``/watch`` streams events on demand."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.arrived = threading.Condition()
        self.loop = asyncio.new_event_loop()
        self.next_event: asyncio.Queue[dict[str, object] | None] | None = None
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    def start(self) -> str:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(TIMEOUT_S)
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self) -> None:
        self.next_event = asyncio.Queue()
        self.runner = aiohttp.web.ServerRunner(
            aiohttp.web.Server(self._handle, handler_cancellation=True), shutdown_timeout=1)
        await self.runner.setup()
        site = aiohttp.web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def _handle(self, request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        with self.arrived:
            self.seen.append((request.method, request.path))
            self.arrived.notify_all()
        if request.query.get("watch") == "1":
            response = aiohttp.web.StreamResponse()
            response.enable_chunked_encoding()
            response.content_type = "application/json"
            await response.prepare(request)
            assert self.next_event is not None
            while (event := await self.next_event.get()) is not None:
                await response.write(json.dumps(event).encode() + b"\n")
            await response.write_eof()
            return response
        return aiohttp.web.json_response({"kind": "Thing", "method": request.method})

    def send(self, event: dict[str, object] | None) -> None:
        """The watch's next event (None ends the stream)."""
        assert self.next_event is not None
        self.loop.call_soon_threadsafe(self.next_event.put_nowait, event)

    def wait_seen(self, count: int) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.seen) >= count, TIMEOUT_S), self.seen

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT_S)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def proxy(upstream: Upstream, tmp_path) -> Iterator[fault_proxy.FaultProxy]:
    with fault_proxy.FaultProxy(f"http://127.0.0.1:{upstream.port}", upstream_ca=None,
                                workdir=tmp_path, tls=True) as p:
        yield p


def client(proxy: fault_proxy.FaultProxy, name: str) -> kube.Api:
    """The SDK's client as ``name``, over TLS, trusting the proxy's CA."""
    return kube.Api(proxy.url(name), ca_file=proxy.ca_file, timeout_s=TIMEOUT_S)


def status_of(call) -> int:
    try:
        call()
    except apierrors.ApiError as exc:
        return exc.status
    return 200


def test_requests_and_answers_pass_through_over_tls(proxy, upstream):
    answer = client(proxy, "w-0").create("/api/v1/namespaces/x/things", {"a": 1})
    assert answer == {"kind": "Thing", "method": "POST"}
    assert upstream.seen == [("POST", "/api/v1/namespaces/x/things")]
    assert [(e.client, e.method, e.status, e.injected) for e in proxy.history()] == [
        ("w-0", "POST", 200, False)]


def test_a_burst_answers_exactly_the_next_n_writes_of_any_client(proxy, upstream):
    proxy.fail_next_writes(3, code=500)
    clients = [client(proxy, f"w-{i}") for i in range(4)]
    assert status_of(lambda: clients[0].get("/api/v1/things")) == 200  # reads pass
    with futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(
            lambda i: status_of(lambda: clients[i % 4].create("/api/v1/things", {})), range(8)))
    assert sorted(codes) == [200] * 5 + [500] * 3
    assert proxy.pending_failures() == 0
    assert proxy.served(500) == 3
    assert sum(1 for method, _ in upstream.seen if method == "POST") == 5


def test_429_says_when_to_retry(proxy, upstream):
    proxy.fail_next_writes(1, code=429)
    url = proxy.url("w-0") + "/api/v1/things"
    request = aiohttp_request("PATCH", url, proxy)
    assert request == (429, str(fault_proxy.RETRY_AFTER_S), "TooManyRequests")
    assert upstream.seen == []


def aiohttp_request(method: str, url: str, proxy: fault_proxy.FaultProxy
                    ) -> tuple[int, str | None, str]:
    async def go() -> tuple[int, str | None, str]:
        context = ssl.create_default_context(cafile=str(proxy.ca_file))
        async with aiohttp.ClientSession() as session, session.request(
                method, url, json={}, ssl=context) as answer:
            body = await answer.json()
            return answer.status, answer.headers.get("Retry-After"), body["reason"]

    return asyncio.run(go())


def test_a_slow_api_holds_every_request_until_its_delay_is_over(proxy, upstream):
    proxy.set_delay(3600)
    api = client(proxy, "w-0")
    with futures.ThreadPoolExecutor(2) as pool:
        write = pool.submit(api.create, "/api/v1/things", {})
        watch = pool.submit(api.watch, "/api/v1/things", query={}, read_timeout_s=TIMEOUT_S)
        wait_until("both requests held", lambda: proxy.holding() == 2)
        assert upstream.seen == []  # held: nothing reached the server
        proxy.set_delay(0)  # the delay is over for both
        assert write.result(TIMEOUT_S) == {"kind": "Thing", "method": "POST"}
        stream = watch.result(TIMEOUT_S)
        upstream.send(None)
        assert list(stream) == []
    assert sorted(upstream.seen) == [("GET", "/api/v1/things"), ("POST", "/api/v1/things")]
    assert sorted((e.method, e.watch, e.held) for e in proxy.history()) == [
        ("GET", True, True), ("POST", False, True)]


def wait_until(what: str, check) -> None:
    """Wait for a condition (polled) to become true."""
    tick = threading.Event()
    for _ in range(TIMEOUT_S * 100):
        if check():
            return
        tick.wait(0.01)
    pytest.fail(f"timed out waiting for {what}")


def test_a_watch_is_streamed_event_by_event(proxy, upstream):
    stream = client(proxy, "w-0").watch("/api/v1/things", query={}, read_timeout_s=TIMEOUT_S)
    events = iter(stream)
    upstream.send({"type": "ADDED", "object": {"n": 1}})
    assert next(events) == {"type": "ADDED", "object": {"n": 1}}  # before the second exists
    upstream.send({"type": "MODIFIED", "object": {"n": 2}})
    assert next(events) == {"type": "MODIFIED", "object": {"n": 2}}
    upstream.send(None)
    assert list(events) == []


def test_a_partitioned_client_is_cut_off_and_the_others_are_not(proxy, upstream):
    cut, other = client(proxy, "w-0"), client(proxy, "w-1")
    stream = cut.watch("/api/v1/things", query={}, read_timeout_s=TIMEOUT_S)
    upstream.wait_seen(1)
    proxy.partition("w-0")
    assert ended_without_events(stream)  # the open watch ends
    assert status_of(lambda: cut.get("/api/v1/things")) == 0
    assert status_of(lambda: other.get("/api/v1/things")) == 200
    proxy.heal("w-0")
    assert status_of(lambda: cut.get("/api/v1/things")) == 200
    # The watch, its end, the refused GET, the GET after the partition healed.
    assert [e.status for e in proxy.history() if e.client == "w-0"] == [200, 0, 0, 200]


def ended_without_events(stream: kube.WatchStream) -> bool:
    """Whether the stream ended (cleanly or broken) before any event came."""
    try:
        return list(stream) == []
    except apierrors.ApiError as exc:
        return exc.status == 0


def test_a_trap_holds_the_first_matching_request_until_released(proxy, upstream):
    fired_before_forwarded = []
    trap = proxy.trap("w-0", "DELETE", "/configmaps/kooper-a",
                      on_trap=lambda: fired_before_forwarded.append(list(upstream.seen)))
    mine, other = client(proxy, "w-0"), client(proxy, "w-1")
    with futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(mine.delete, "/api/v1/namespaces/x/configmaps/kooper-a")
        assert trap.wait(TIMEOUT_S)
        assert fired_before_forwarded == [[]]  # on_trap ran as it arrived, before forwarding
        assert trap.path == "/api/v1/namespaces/x/configmaps/kooper-a"
        # Held: everything else passes meanwhile (other methods, paths and clients).
        mine.get("/api/v1/namespaces/x/configmaps/kooper-a")
        mine.delete("/api/v1/namespaces/x/configmaps/kooper-b")
        other.delete("/api/v1/namespaces/x/configmaps/kooper-a")
        upstream.wait_seen(3)
        assert not held.done()
        assert upstream.seen.count(("DELETE", trap.path)) == 1  # w-1's, not the held one
        assert [e.client for e in proxy.history() if e.method == "DELETE"
                and e.path == trap.path] == ["w-1"]
        trap.release()
        assert held.result(TIMEOUT_S) == {"kind": "Thing", "method": "DELETE"}
    assert upstream.seen[-1] == ("DELETE", trap.path)
    mine.delete(trap.path)  # fired once: the next one passes at once
    assert [(e.client, e.status, e.trapped) for e in proxy.history()
            if e.method == "DELETE" and e.path == trap.path] == [
        ("w-1", 200, False), ("w-0", 200, True), ("w-0", 200, False)]
    assert fired_before_forwarded == [[]]


def test_a_trapped_request_whose_client_gave_up_is_never_forwarded(proxy, upstream):
    trap = proxy.trap("w-0", "PUT", "/configmaps/kooper-a")
    impatient = kube.Api(proxy.url("w-0"), ca_file=proxy.ca_file, timeout_s=0.5)
    assert status_of(lambda: impatient.request(
        "PUT", "/api/v1/namespaces/x/configmaps/kooper-a", body={})) == 0
    assert trap.fired.is_set()
    wait_until("the abandoned request recorded", proxy.history)
    trap.release()
    client(proxy, "w-0").get("/api/v1/things")  # the proxy answers on: nothing was queued
    assert upstream.seen == [("GET", "/api/v1/things")]
    assert [(e.method, e.status, e.trapped) for e in proxy.history()] == [
        ("PUT", 0, True), ("GET", 200, False)]


def test_clear_releases_a_held_request(proxy, upstream):
    trap = proxy.trap("w-0", "POST", "/things")
    with futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(client(proxy, "w-0").create, "/api/v1/things", {})
        assert trap.wait(TIMEOUT_S)
        proxy.clear()
        assert held.result(TIMEOUT_S) == {"kind": "Thing", "method": "POST"}
