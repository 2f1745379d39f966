#!/usr/bin/env bash
# Everything the kind drills need before a cluster exists, with its progress on stderr
# (the drills' pytest run captures the output of what it starts): Docker, the pinned
# kind and helm, the node image (pulled or built offline) and kooper's images. Run by
# `make kind-tier` and `make e2e` before pytest; all cached, so a no-op when warm.
#
# Where Docker cannot be had it says so in one line and exits 0: the drills then skip
# with that line, or fail where KOOPER_REQUIRE_KIND is set (.ci/run).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! bash "$here/docker.sh"; then
    echo "kind: no Docker, so the kind drills will not run here" >&2
    exit 0
fi
started=$SECONDS
echo "kind: kind and helm: $(bash "$here/bins.sh" tools)" >&2
echo "kind: node image: $(bash "$here/images.sh" node)" >&2
echo "kind: kooper's images: $(bash "$here/images.sh" kooper)" >&2
echo "kind: ready in $((SECONDS - started)) s" >&2
