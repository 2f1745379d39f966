#!/usr/bin/env bash
# The images of the kind tier, built locally and cached in Docker under tags keyed by
# their inputs (a no-op when present). Prints the image reference.
#
#   hack/kind/images.sh node      # the kind node image: the pinned official one where a
#                                 # registry answers, else one built offline (below)
#   hack/kind/images.sh kooper    # kooper's operator and worker images from ./Dockerfile
#                                 # (prints "OPERATOR WORKER")
#   hack/kind/images.sh python    # the local Python base (Debian's python3.11)
#   hack/kind/images.sh debian    # the debootstrapped Debian base
#
# KOOPER_KIND_OFFLINE=1 builds offline without trying a registry; =0 never builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=pins.env
source "$here/pins.env"
recipe=1  # bump when a build below changes what it produces
what="${1:?usage: images.sh node|kooper|python|debian}"

say() { echo "images: $*" >&2; }
scratch=()  # temporary directories and build containers, removed on exit
cleanup() {
    local item
    for item in "${scratch[@]}"; do
        if [[ -d "$item" ]]; then rm -rf "$item"; else docker rm -f -v "$item" >/dev/null 2>&1 || true; fi
    done
}
trap cleanup EXIT
present() { docker image inspect "$1" >/dev/null 2>&1; }
hash_of() { (echo "$recipe"; cat "$@") | sha256sum | cut -c1-12; }

debian() {
    local tag="kooper.local/debian:$DEBIAN_SUITE-$(hash_of <(echo "$DEBIAN_SUITE"))"
    if ! present "$tag"; then
        command -v debootstrap >/dev/null || {
            say "installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }
        local rootfs; rootfs="$(mktemp -d)"; scratch+=("$rootfs")
        say "debootstrap --variant=minbase $DEBIAN_SUITE (about a minute)"
        debootstrap --variant=minbase "$DEBIAN_SUITE" "$rootfs" >/dev/null
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
        rm -rf "$rootfs"
    fi
    echo "$tag"
}

python_base() {
    local base; base="$(debian)"
    local tag="kooper.local/python:3.11-$DEBIAN_SUITE-$(hash_of "$here/python.Dockerfile" /etc/ssl/certs/ca-certificates.crt <(echo "$base"))"
    if ! present "$tag"; then
        local ctx; ctx="$(mktemp -d)"
        cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
        say "building $tag"
        docker build -q -f "$here/python.Dockerfile" --build-arg "DEBIAN_BASE=$base" -t "$tag" "$ctx" >/dev/null
        rm -rf "$ctx"
    fi
    echo "$tag"
}

registry_answers() {
    [[ "${KOOPER_KIND_OFFLINE:-}" != 1 ]] || return 1
    timeout 60 docker pull -q "$1" >/dev/null 2>&1
}

kooper_images() {
    local version; version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/pyproject.toml" | head -1)"
    local args=()
    if ! registry_answers "python:3.11-slim-bookworm"; then
        args=(--build-arg "PYTHON_BASE=$(python_base)")
    fi
    local target image
    for target in operator worker; do
        image="kooper:$version"; [[ "$target" == worker ]] && image="kooper-worker:$version"
        say "docker build --target $target -t $image"
        docker build -q "${args[@]}" --target "$target" -t "$image" "$root" >/dev/null
    done
    echo "kooper:$version kooper-worker:$version"
}

node_offline() {
    local control node base
    control="$(bash "$root/hack/kube/build.sh")"
    node="$(bash "$here/bins.sh" node)"
    base="$(debian)"
    local kube_version; kube_version="$("$node/kubeadm" version -o short)"
    local tag="kooper.local/kind-node:$kube_version-$(hash_of "$here/pins.env" "$here/node-base.Dockerfile" \
        "$here/components.Dockerfile" "$here/containerd-config.toml" <(echo "$(basename "$control") $(basename "$node") $base"))"
    if present "$tag"; then echo "$tag"; return; fi

    local kind_dir ctx
    kind_dir="$(cd "$root/hack/kube" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" \
        | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
    ctx="$(mktemp -d)"
    scratch+=("$ctx")
    cp -r "$kind_dir/images/base/files" "$ctx/files"
    chmod -R u+w "$ctx/files"
    sed "s/PAUSE_VERSION/$PAUSE_VERSION/" "$here/containerd-config.toml" > "$ctx/containerd-config.toml"
    local node_base="kooper.local/kind-base:$DEBIAN_SUITE-$(hash_of "$here/node-base.Dockerfile" "$ctx/containerd-config.toml" <(echo "$base $KIND_VERSION"))"
    if ! present "$node_base"; then
        say "building $node_base"
        docker build -q -f "$here/node-base.Dockerfile" --build-arg "DEBIAN_BASE=$base" -t "$node_base" "$ctx" >/dev/null
    fi

    # The component images, saved to one archive per image.
    local bin comp
    mkdir -p "$ctx/bin" "$ctx/archives"
    for bin in kube-apiserver kube-controller-manager etcd; do cp "$control/$bin" "$ctx/bin/"; done
    for bin in kube-scheduler kube-proxy coredns pause; do cp "$node/$bin" "$ctx/bin/"; done
    declare -A names=(
        [kube-apiserver]="registry.k8s.io/kube-apiserver:$kube_version"
        [kube-controller-manager]="registry.k8s.io/kube-controller-manager:$kube_version"
        [kube-scheduler]="registry.k8s.io/kube-scheduler:$kube_version"
        [kube-proxy]="registry.k8s.io/kube-proxy:$kube_version"
        [etcd]="registry.k8s.io/etcd:$ETCD_IMAGE_TAG"
        [coredns]="registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
        [pause]="registry.k8s.io/pause:$PAUSE_VERSION"
    )
    for comp in "${!names[@]}"; do
        say "building ${names[$comp]}"
        docker build -q -f "$here/components.Dockerfile" --build-arg "DEBIAN_BASE=$base" \
            --target "$comp" -t "${names[$comp]}" "$ctx/bin" >/dev/null
        docker save "${names[$comp]}" -o "$ctx/archives/$comp.tar"
    done

    # What `kind build node-image` does, with the images imported by Debian's ctr.
    say "assembling $tag"
    local box="kooper-node-build-$$"
    docker run -d --name "$box" --entrypoint=sleep --security-opt seccomp=unconfined "$node_base" infinity >/dev/null
    scratch+=("$box")
    for bin in kubelet kubeadm crictl; do docker cp "$node/$bin" "$box:/usr/bin/$bin"; done
    docker cp "$control/kubectl" "$box:/usr/bin/kubectl"
    docker exec "$box" bash -c "chmod 755 /usr/bin/kube* /usr/bin/crictl && chown root:root /usr/bin/kube* /usr/bin/crictl \
        && echo -n $kube_version > /kind/version && mkdir -p /kind/manifests"
    # No dynamic volume provisioner offline (the drills use no volumes): a default
    # StorageClass only, where kind's image would run local-path-provisioner.
    docker exec -i "$box" tee /kind/manifests/default-storage.yaml >/dev/null <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
YAML
    docker exec "$box" bash -c 'nohup containerd >/dev/null 2>&1 &
        for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1'
    for comp in "${!names[@]}"; do
        docker exec -i "$box" ctr --namespace=k8s.io images import --all-platforms --no-unpack --digests - \
            < "$ctx/archives/$comp.tar" >/dev/null
        docker exec "$box" ctr --namespace=k8s.io images label "${names[$comp]}" io.cri-containerd.pinned=pinned >/dev/null
    done
    docker exec "$box" pkill containerd || true
    docker commit \
        --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
        --change "LABEL dev.kooper.offline-node=$kube_version" \
        "$box" "$tag" >/dev/null
    echo "$tag"
}

node() {
    if [[ -n "${KOOPER_KIND_NODE_IMAGE:-}" ]]; then echo "$KOOPER_KIND_NODE_IMAGE"; return; fi
    if present "$KIND_NODE_IMAGE" || registry_answers "$KIND_NODE_IMAGE"; then
        echo "$KIND_NODE_IMAGE"; return
    fi
    if [[ "${KOOPER_KIND_OFFLINE:-}" == 0 ]]; then
        say "cannot pull $KIND_NODE_IMAGE and KOOPER_KIND_OFFLINE=0"; exit 1
    fi
    say "no registry answers: building the node image offline"
    node_offline
}

case "$what" in
debian) debian ;;
python) python_base ;;
kooper) kooper_images ;;
node) node ;;
*) echo "usage: images.sh node|kooper|python|debian" >&2; exit 2 ;;
esac
