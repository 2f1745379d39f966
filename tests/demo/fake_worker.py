"""A stand-in for ``kooper worker --demo`` in pod-runner tests: Lease, rows, SIGTERM.

It creates its Lease ``kooper-<pod>`` owned by its Pod (as the SDK does), writes
a ``start`` row for ``<pod>-work`` and, on SIGTERM, a ``stop`` row, then exits.
"""

import json
import os
import signal
import sys
import time
import urllib.request


def row(event: str) -> str:
    return json.dumps({"ts_ms": int(time.time() * 1000), "run": "", "group": "demo",
                       "member": os.environ["POD_NAME"], "resource": "work", "event": event})


def main() -> None:
    events_file = sys.argv[sys.argv.index("--events-file") + 1]
    api, pod, ns = (os.environ["KOOPER_KUBE_API"], os.environ["POD_NAME"],
                    os.environ["POD_NAMESPACE"])
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": f"kooper-{pod}", "annotations": {"kooper.dev/report": "{}"},
                          "ownerReferences": [
                 {"apiVersion": "v1", "kind": "Pod", "name": pod,
                  "uid": os.environ["POD_UID"]}]},
             "spec": {"holderIdentity": pod}}
    request = urllib.request.Request(
        f"{api}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        data=json.dumps(lease).encode(), headers={"Content-Type": "application/json"})
    stopping = []
    # Before the Lease exists: the runner may SIGTERM us as soon as it sees the Lease.
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    with open(events_file, "a") as out:
        urllib.request.urlopen(request).read()
        out.write(row("start") + "\n")
        out.flush()
        while not stopping:
            time.sleep(0.02)
        out.write(row("stop") + "\n")
    print("not a row: a log line")


if __name__ == "__main__":
    main()
