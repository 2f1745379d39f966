#!/usr/bin/env bash
# Build the real control plane's binaries (kube-apiserver, kube-controller-manager,
# kubectl, etcd) from the Go modules pinned in hack/kube/go.mod, once, into a
# versioned cache outside the repository. A no-op when that cache is complete.
#
#   hack/kube/build.sh            # prints the directory holding the binaries
#   hack/kube/build.sh --check    # the same, but fails instead of building
#   KOOPER_KUBE_DIR=/path ...     # use (or build into) that directory instead
#
# The directory name carries the Kubernetes and etcd versions and a hash of
# go.mod/go.sum, so changing a pin builds a new set beside the old one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

kube_version="$(sed -n 's#^require k8s.io/kubernetes \(v[0-9.]*\)$#\1#p; s#^\tk8s.io/kubernetes \(v[0-9.]*\)$#\1#p' go.mod | head -1)"
etcd_version="$(sed -n 's#^\tgo.etcd.io/etcd/server/v3 \(v[0-9.]*\).*#\1#p' go.mod | head -1)"
recipe=1  # bump when the go build command below changes what it produces
pins="$( (echo "$recipe"; cat go.mod go.sum etcd/main.go tools.go) | sha256sum | cut -c1-12)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kooper"
dir="${KOOPER_KUBE_DIR:-$cache/kube-$kube_version-etcd-$etcd_version-$pins}"
bins=(kube-apiserver kube-controller-manager kubectl etcd)

complete() {
    local b
    for b in "${bins[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}

if complete "$dir"; then
    echo "$dir"
    exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
    echo "not built: $dir (make kube-bins)" >&2
    exit 1
fi

# shellcheck source=ldflags.sh
source "$here/ldflags.sh"
ldflags="$(kube_ldflags "$kube_version")"

mkdir -p "$(dirname "$dir")"
tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "building kube-apiserver, kube-controller-manager, kubectl $kube_version and etcd $etcd_version into $dir" >&2
# One `go build` for all four commands, so the packages they share compile once.
CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl \
    ./etcd
complete "$tmp"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
