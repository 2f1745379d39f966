#!/usr/bin/env bash
# Build Prometheus' promtool (the real rule and PromQL checker the chart tests use) from
# its Go module at a pinned version, once, into a versioned cache outside the repository.
# A no-op when that cache holds it.
#
#   hack/promtool/build.sh          # prints the path of the promtool binary
#   hack/promtool/build.sh --check  # the same, but fails instead of building
#   KOOPER_PROMTOOL=/path/promtool  # use that binary instead (tests read it too)
set -euo pipefail
version=v0.316.0  # github.com/prometheus/prometheus; tests/chart/test_observability.py pins it too
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kooper"
dir="$cache/promtool-$version"
bin="${KOOPER_PROMTOOL:-$dir/promtool}"

if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
    echo "not built: $bin (bash hack/promtool/build.sh)" >&2
    exit 1
fi
mkdir -p "$cache"
tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "building promtool $version into $dir" >&2
# go install verifies the module and its dependencies against the checksum database.
GOBIN="$tmp" go install "github.com/prometheus/prometheus/cmd/promtool@$version"
"$tmp/promtool" --version >/dev/null
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir/promtool"
