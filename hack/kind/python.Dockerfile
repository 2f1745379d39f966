# The Python base kooper's Dockerfile builds on where no registry answers
# (hack/kind/images.sh passes it as PYTHON_BASE): Debian's python3.11 on the
# debootstrapped Debian base, with the host's CA bundle so pip reaches the
# package index through this network's TLS proxy.
ARG DEBIAN_BASE
FROM ${DEBIAN_BASE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       python3 python3-venv python-is-python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
