# The offline kind node's base: kind's own images/base (v0.33.0, files from its Go
# module) on the debootstrapped Debian, with Debian's systemd, containerd, runc and CNI
# plugins in place of the ones kind builds from source. hack/kind/images.sh builds it
# with a context holding kind's images/base/files and our containerd config.
ARG DEBIAN_BASE
FROM ${DEBIAN_BASE}
# Plain COPY and chmod (no --chmod), so the legacy builder builds it too.
COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/etc/default/ /etc/default/
COPY files/etc/sysctl.d/ /etc/sysctl.d/
COPY files/etc/systemd/system/ /etc/systemd/system/
COPY files/etc/crictl.yaml /etc/crictl.yaml
RUN chmod -R go-w /kind /etc/systemd/system /etc/default /etc/sysctl.d \
    && chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* \
    && apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod \
       libseccomp2 pigz bash ca-certificates curl jq procps \
       containerd runc containernetworking-plugins \
    && rm -rf /var/lib/apt/lists/* \
    && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
    && rm -f /lib/systemd/system/multi-user.target.wants/* \
    && rm -f /etc/systemd/system/*.wants/* \
    && rm -f /lib/systemd/system/local-fs.target.wants/* \
    && rm -f /lib/systemd/system/sockets.target.wants/*udev* \
    && rm -f /lib/systemd/system/sockets.target.wants/*initctl* \
    && rm -f /lib/systemd/system/basic.target.wants/* \
    && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
    && ln -sf /usr/lib/systemd/systemd /sbin/init \
    && mkdir -p /opt/cni/bin && ln -s /usr/lib/cni/* /opt/cni/bin/ \
    && ln -sf /usr/bin/containerd /usr/local/bin/containerd \
    && ln -sf /usr/bin/containerd-shim-runc-v2 /usr/local/bin/containerd-shim-runc-v2 \
    && ln -sf /usr/bin/ctr /usr/local/bin/ctr \
    && ln -sf /usr/sbin/runc /usr/local/sbin/runc
# After the packages, so apt does not stop at a conffile prompt over containerd's config.
COPY containerd-config.toml /etc/containerd/config.toml
RUN ctr oci spec \
        | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
        | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \
    && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
    && systemctl mask systemd-binfmt.service \
    && mkdir -p /etc/kubernetes/manifests
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
