# The images a kind node needs and kubeadm would otherwise pull, built from our own
# binaries (hack/kind/bins.sh, hack/kube/build.sh) under upstream's names, so kind's and
# kubeadm's manifests work unchanged. One target per image; hack/kind/images.sh builds
# them with a context holding the binaries.
ARG DEBIAN_BASE

FROM scratch AS pause
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]

FROM ${DEBIAN_BASE} AS kube-apiserver
COPY kube-apiserver /usr/local/bin/

FROM ${DEBIAN_BASE} AS kube-controller-manager
COPY kube-controller-manager /usr/local/bin/

FROM ${DEBIAN_BASE} AS kube-scheduler
COPY kube-scheduler /usr/local/bin/

FROM ${DEBIAN_BASE} AS etcd
COPY etcd /usr/local/bin/

FROM ${DEBIAN_BASE} AS coredns
COPY coredns /coredns
ENTRYPOINT ["/coredns"]

FROM ${DEBIAN_BASE} AS kube-proxy
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       iptables conntrack ipset kmod \
    && rm -rf /var/lib/apt/lists/*
COPY kube-proxy /usr/local/bin/
