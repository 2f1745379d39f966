#!/usr/bin/env bash
# A kind cluster for kooper's drills: one control plane and two workers, from the node
# image hack/kind/images.sh gives (the pinned official one, or one built offline), with
# kooper's operator and worker images loaded. Idempotent: an existing cluster of that
# name is reused once its nodes are Ready.
#
#   hack/kind/cluster.sh up   [NAME]   # create (or reuse), load images; prints the kube context
#   hack/kind/cluster.sh down [NAME]
#   hack/kind/cluster.sh env           # PATH entries for the pinned kind, helm and kubectl
#   hack/kind/cluster.sh routes [NAME] # offline nodes: set the pod routes again (a node
#                                      # reconnected to the network may get a new IP)
#
# Every node mounts $KOOPER_KIND_EVENTS (default ~/.cache/kooper/kind-events/NAME) at
# /var/log/kooper-events: workers given `--events-dir` there write their own rows to
# this host, where they outlive pods, nodes and the cluster.
#
# Offline node images run no CNI daemon (kind's kindnetd cannot be built here): each node
# gets Debian's bridge plugin on its podCIDR and a route to every other node's podCIDR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
action="${1:?usage: cluster.sh up|down|env|routes [NAME]}"
name="${2:-${KOOPER_KIND_CLUSTER:-kooper-e2e}}"
say() { echo "kind: $*" >&2; }

tools_dir="$(bash "$here/bins.sh" tools)"
kube_dir="$(bash "$root/hack/kube/build.sh")"
export PATH="$tools_dir:$kube_dir:$PATH"
context="kind-$name"
events="${KOOPER_KIND_EVENTS:-${XDG_CACHE_HOME:-$HOME/.cache}/kooper/kind-events/$name}"

if [[ "$action" == env ]]; then echo "$tools_dir:$kube_dir"; exit 0; fi
if [[ "$action" == down ]]; then kind delete cluster --name "$name"; exit 0; fi

[[ "$action" == up || "$action" == routes ]] || { echo "usage: cluster.sh up|down|env|routes [NAME]" >&2; exit 2; }

bridge_cni() {
    # Every node: a bridge on its own podCIDR, and routes to the others' through their IPs
    # (read from Docker: a node reconnected to the network may have a new one).
    local nodes node cidr ip other ocidr oip
    nodes="$(kubectl --context "$context" get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR}{"\n"}{end}' \
        | while read -r node cidr; do
            echo "$node $cidr $(docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$node")"
        done)"
    while read -r node cidr ip; do
        [[ -n "$cidr" && -n "$ip" ]] || { say "node $node has no podCIDR or IP yet"; return 1; }
        docker exec -i "$node" tee /etc/cni/net.d/10-kooper-bridge.conflist >/dev/null <<JSON
{"cniVersion": "1.0.0", "name": "kooper", "plugins": [
  {"type": "bridge", "bridge": "kbr0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
        while read -r other ocidr oip; do
            [[ "$other" == "$node" ]] || docker exec "$node" ip route replace "$ocidr" via "$oip"
        done <<< "$nodes"
    done <<< "$nodes"
}

if [[ "$action" == routes ]]; then
    node_image="$(docker inspect -f '{{.Config.Image}}' "$name-control-plane")"
    if [[ -n "$(docker image inspect -f '{{index .Config.Labels "dev.kooper.offline-node"}}' "$node_image")" ]]; then
        bridge_cni
    fi
    exit 0
fi
bash "$here/docker.sh"
node_image="$(bash "$here/images.sh" node)"
offline="$(docker image inspect -f '{{index .Config.Labels "dev.kooper.offline-node"}}' "$node_image")"
if ! kind get clusters 2>/dev/null | grep -qx "$name"; then
    config="$(mktemp)"
    trap 'rm -f "$config"' EXIT
    mkdir -p "$events"
    find "$events" -mindepth 1 -delete  # rows of an earlier cluster are not this one's
    chmod 1777 "$events"
    {
        # One control plane and two workers, so a member pod may land on another node
        # and a node can fail under some members while others run on.
        printf 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n'
        for role in control-plane worker worker; do
            # The workers' own event rows land on this host, past any pod's life.
            printf '  - role: %s\n    extraMounts:\n      - hostPath: %s\n        containerPath: /var/log/kooper-events\n' \
                "$role" "$events"
        done
        # kubelet >= 1.35 refuses cgroup v1 unless told; these hosts have nothing else.
        cat <<'YAML'
kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
YAML
        [[ -z "$offline" ]] || printf 'networking:\n  disableDefaultCNI: true\n'
    } > "$config"
    say "creating cluster $name from $node_image"
    kind create cluster --name "$name" --image "$node_image" --config "$config" --wait 0s >&2
fi
if [[ -n "$offline" ]]; then
    for _ in $(seq 1 60); do bridge_cni && break; sleep 2; done
fi
kubectl --context "$context" wait --for=condition=Ready nodes --all --timeout=300s >&2

read -r operator worker <<< "$(bash "$here/images.sh" kooper)"
for image in "$operator" "$worker"; do
    say "loading $image"
    kind load docker-image "$image" --name "$name" >&2
done
echo "$context"
