#!/usr/bin/env bash
# Make sure a Docker daemon answers, for the kind tier of `make test` and `make e2e`.
#
#   hack/kind/docker.sh          # exit 0 when `docker info` answers (starting it if we may)
#
# Where none answers and this runs as root on Debian (CI, this project's machines), it
# installs Debian's docker.io, puts hack/kind/runc-shim.py in front of runc when the
# host's capability bounding set lacks capabilities `--privileged` asks for, and starts
# dockerd in the background (log: /var/log/kooper-dockerd.log). Anywhere else (a laptop)
# it changes nothing: it says what is missing, in one line, and exits 1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

answers() { docker info >/dev/null 2>&1; }

if answers; then exit 0; fi
if [[ "$(id -u)" != 0 || ! -r /etc/debian_version ]]; then
    echo "no Docker daemon answers: start Docker (or run as root on Debian to have it installed)" >&2
    exit 1
fi

if ! command -v dockerd >/dev/null; then
    echo "installing Debian's docker.io ..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq docker.io >/dev/null
fi

bounding="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
full="$(( (1 << ($(cat /proc/sys/kernel/cap_last_cap) + 1)) - 1 ))"
if (( 16#$bounding != full )); then
    # Privileged containers would ask for a capability this host cannot grant.
    install -D -m 0755 "$here/runc-shim.py" /usr/local/lib/kooper/runc-shim
    mkdir -p /etc/docker
    /usr/bin/python3 - <<'PY'
import json, pathlib
path = pathlib.Path("/etc/docker/daemon.json")
config = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
config.setdefault("runtimes", {})["kooper-runc"] = {"path": "/usr/local/lib/kooper/runc-shim"}
config["default-runtime"] = "kooper-runc"
path.write_text(json.dumps(config, indent=2) + "\n")
PY
fi

if ! pgrep -x dockerd >/dev/null; then
    echo "starting dockerd (log: /var/log/kooper-dockerd.log) ..." >&2
    if ! pgrep -x containerd >/dev/null && [[ -x /usr/bin/containerd ]]; then
        setsid nohup containerd >/var/log/kooper-containerd.log 2>&1 < /dev/null &
    fi
    setsid nohup dockerd --containerd=/run/containerd/containerd.sock \
        >/var/log/kooper-dockerd.log 2>&1 < /dev/null &
fi
for _ in $(seq 1 60); do
    if answers; then exit 0; fi
    sleep 1
done
echo "dockerd did not answer within 60 s: see /var/log/kooper-dockerd.log" >&2
exit 1
