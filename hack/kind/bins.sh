#!/usr/bin/env bash
# Build the kind tier's binaries from their Go modules at the versions in pins.env, once,
# into a cache outside the repository keyed by those pins. Prints the directory.
#
#   hack/kind/bins.sh tools   # kind and helm (every machine)
#   hack/kind/bins.sh node    # the offline node image's: kubelet, kubeadm, kube-scheduler,
#                             # kube-proxy (hack/kube's pins), coredns, crictl, pause
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=pins.env
source "$here/pins.env"
set_name="${1:?usage: bins.sh tools|node}"
# Bump a set's recipe when its build command below changes what it produces; each set
# has its own, so a change to one rebuilds only that one (the node set is the long build).
tools_recipe=2
node_recipe=2
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kooper"

case "$set_name" in
tools)
    bins=(kind helm)
    pins="$( (echo "$tools_recipe"; grep -E '^(KIND|HELM)_VERSION=' "$here/pins.env") | sha256sum | cut -c1-12)"
    dir="$cache/kind-tools-$KIND_VERSION-helm-$HELM_VERSION-$pins"
    ;;
node)
    bins=(kubelet kubeadm kube-scheduler kube-proxy coredns crictl pause)
    pins="$( (echo "$node_recipe"; cat "$here/pins.env" "$here/../kube/go.mod" "$here/../kube/go.sum") | sha256sum | cut -c1-12)"
    dir="$cache/kind-node-bins-$pins"
    ;;
*) echo "usage: bins.sh tools|node" >&2; exit 2 ;;
esac

complete() {
    local b
    for b in "${bins[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}
if complete "$dir"; then echo "$dir"; exit 0; fi

mkdir -p "$cache"
tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOFLAGS="-trimpath"

case "$set_name" in
tools)
    echo "building kind $KIND_VERSION and helm $HELM_VERSION into $dir" >&2
    GOBIN="$tmp" go install -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
    # As Helm's Makefile: stamp the Kubernetes version of Helm's client-go, which `helm
    # template` (no cluster) checks kubeVersion against and `helm lint` checks deprecations
    # against; without it Helm assumes 1.20 and refuses the chart (kubeVersion >=1.30).
    helm_mod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
    client_go="$(sed -n 's#^\tk8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$helm_mod" | head -1)"
    [[ -n "$client_go" ]] || { echo "no k8s.io/client-go in $helm_mod" >&2; exit 1; }
    kv="-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$client_go"
    kv="$kv -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$client_go"
    GOBIN="$tmp" go install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION $kv" \
        "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    ;;
node)
    kube_version="$(sed -n 's#^\tk8s.io/kubernetes \(v[0-9.]*\)$#\1#p' "$here/../kube/go.mod" | head -1)"
    # shellcheck source=../kube/ldflags.sh
    source "$here/../kube/ldflags.sh"
    ldflags="$(kube_ldflags "$kube_version")"
    echo "building kubelet, kubeadm, kube-scheduler, kube-proxy $kube_version, coredns $COREDNS_VERSION, crictl $CRICTL_VERSION and pause $PAUSE_VERSION into $dir" >&2
    (cd "$here/../kube" && GOFLAGS="$GOFLAGS -mod=readonly" go build -ldflags "$ldflags" -o "$tmp/" \
        k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy)
    GOBIN="$tmp" go install -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
    GOBIN="$tmp" go install -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
        "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
    # The pod sandbox's pause, from the C source Kubernetes ships in its module.
    pause_src="$(cd "$here/../kube" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
    cc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION" -o "$tmp/pause" "$pause_src"
    strip "$tmp/pause"
    ;;
esac
complete "$tmp"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
