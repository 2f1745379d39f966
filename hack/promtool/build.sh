#!/usr/bin/env bash
# Fetch Prometheus' promtool (the real rule and PromQL checker the chart tests use) once,
# into a versioned cache outside the repository; a no-op when that cache holds one.
#
# First choice: Debian's `prometheus` package, unpacked (apt-get download + dpkg -x: no
# install, no service started), about 4 s. Fallback where no Debian package can be had:
# build it from Prometheus' Go module at a pinned version (10-25 min on 2 cores).
#
#   hack/promtool/build.sh          # prints the path of the promtool binary
#   hack/promtool/build.sh --check  # the same, but fails instead of fetching
#   KOOPER_PROMTOOL=/path/promtool  # use that binary instead
set -euo pipefail
go_version=v0.316.0  # github.com/prometheus/prometheus, for the fallback build
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kooper"

if [[ -n "${KOOPER_PROMTOOL:-}" ]]; then
    [[ -x "$KOOPER_PROMTOOL" ]] || { echo "KOOPER_PROMTOOL=$KOOPER_PROMTOOL is not executable" >&2; exit 1; }
    echo "$KOOPER_PROMTOOL"
    exit 0
fi
for bin in "$cache"/promtool-deb-*/promtool "$cache/promtool-$go_version/promtool"; do
    if [[ -x "$bin" ]]; then
        echo "$bin"
        exit 0
    fi
done
if [[ "${1:-}" == "--check" ]]; then
    echo "promtool is not in $cache (bash hack/promtool/build.sh; make test does)" >&2
    exit 1
fi
mkdir -p "$cache"
tmp="$(mktemp -d "$cache/promtool.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

if command -v apt-get >/dev/null && (cd "$tmp" && apt-get download -q prometheus >/dev/null 2>&1); then
    deb="$(ls "$tmp"/prometheus_*.deb)"
    version="$(dpkg-deb -f "$deb" Version)"
    dpkg-deb -x "$deb" "$tmp/root"
    dir="$cache/promtool-deb-$version"
    mkdir -p "$tmp/out"
    mv "$tmp/root/usr/bin/promtool" "$tmp/out/promtool"
    echo "promtool from Debian's prometheus $version into $dir" >&2
else
    dir="$cache/promtool-$go_version"
    echo "no Debian package: building promtool $go_version into $dir" >&2
    # go install verifies the module and its dependencies against the checksum database.
    GOBIN="$tmp/out" go install "github.com/prometheus/prometheus/cmd/promtool@$go_version"
fi
"$tmp/out/promtool" --version >/dev/null
rm -rf "$dir"
mv "$tmp/out" "$dir"
echo "$dir/promtool"
