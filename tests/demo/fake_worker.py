"""A stand-in for ``kooper worker --demo`` in pod-runner tests: Lease, rows, SIGTERM.

It creates its Lease ``kooper-<pod>`` owned by its Pod (as the SDK does), writes
a ``start`` row for ``work`` and, on SIGTERM, does what the SDK does: a ``stop``
row, then it deletes its own Lease and exits 0. The stop row's ``epoch`` says
whether its Pod was already terminating (1) or not (0) when the signal came,
so a test can check the kubelet's order. With ``FAKE_IGNORE_SIGTERM=1`` it
ignores SIGTERM (a worker stuck past its grace period).
"""

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request


def row(event: str, epoch: int = -1) -> str:
    return json.dumps({"ts_ms": int(time.time() * 1000), "run": "", "group": "demo",
                       "member": os.environ["POD_NAME"], "resource": "work", "event": event,
                       "epoch": epoch})


def call(method: str, url: str, body: dict | None = None) -> dict | None:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def main() -> None:
    events_file = sys.argv[sys.argv.index("--events-file") + 1]
    api, pod, ns = (os.environ["KOOPER_KUBE_API"], os.environ["POD_NAME"],
                    os.environ["POD_NAMESPACE"])
    leases = f"{api}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": f"kooper-{pod}", "annotations": {"kooper.dev/report": "{}"},
                          "ownerReferences": [
                 {"apiVersion": "v1", "kind": "Pod", "name": pod,
                  "uid": os.environ["POD_UID"]}]},
             "spec": {"holderIdentity": pod}}
    stopping = []
    # Before the Lease exists: the runner may SIGTERM us as soon as it sees the Lease.
    if os.environ.get("FAKE_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    with open(events_file, "a") as out:
        # The row first: a test that sees the Lease (has_joined) may SIGKILL us at once,
        # and must then find the start row on disk.
        out.write(row("start") + "\n")
        out.flush()
        call("POST", leases, lease)
        while not stopping:
            time.sleep(0.02)
        body = call("GET", f"{api}/api/v1/namespaces/{ns}/pods/{pod}") or {}
        terminating = bool(body.get("metadata", {}).get("deletionTimestamp"))
        out.write(row("stop", epoch=int(terminating)) + "\n")
        out.flush()
        call("DELETE", f"{leases}/kooper-{pod}")
    print("not a row: a log line")


if __name__ == "__main__":
    main()
