# kooper images: two targets from one file.
#
#   docker build --target operator -t kooper:0.1.0 .         # `kooper run`    (kooper[operator]: kopf, kubernetes, prometheus-client, aiohttp, pyyaml)
#   docker build --target worker   -t kooper-worker:0.1.0 .  # `kooper worker` (plain kooper: the standard library only)
#
# The base image is an ARG so releases pin it by digest (a tag can move under you):
#   docker buildx imagetools inspect python:3.11-slim-bookworm   # prints "Digest: sha256:..."
#   docker build --build-arg PYTHON_BASE=python:3.11-slim-bookworm@sha256:<that digest> ...
# The default below is the unpinned tag so that a fresh checkout builds; CI that
# publishes images must pass the pinned reference (docs/install.md, "Pinning the base image").
# Where no registry answers, hack/kind/images.sh passes a Python base it built from
# Debian's python3.11 (docs/install.md, "Offline").
#
# No `# syntax=` line (BuildKit would fetch that frontend from a registry) and stages in
# the order the legacy builder needs: it builds every stage above its target, so the
# worker target never builds the operator's virtualenv.
ARG PYTHON_BASE=python:3.11-slim-bookworm

# ---- build stages: one virtualenv per role, at the same path as at run time ----
FROM ${PYTHON_BASE} AS build-base
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Only what the package build needs (see .dockerignore): source, metadata, readme.
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN python -m venv /opt/kooper

FROM build-base AS build-worker
RUN /opt/kooper/bin/pip install --no-compile . \
    && /opt/kooper/bin/python -m compileall -q /opt/kooper/lib \
    && /opt/kooper/bin/python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('kopf', 'kubernetes', 'aiohttp', 'pyspark')))"

# ---- runtime stages ----
FROM ${PYTHON_BASE} AS runtime
# A fixed non-root uid/gid, matching the chart's runAsUser/runAsGroup (10001).
RUN groupadd --system --gid 10001 kooper \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin kooper
ENV PATH=/opt/kooper/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
ENTRYPOINT ["kooper"]

FROM runtime AS worker
COPY --from=build-worker /opt/kooper /opt/kooper
CMD ["worker", "--demo"]

FROM build-base AS build-operator
# The build fails if anything only the demo or the analytics need sneaks in.
RUN /opt/kooper/bin/pip install --no-compile ".[operator]" \
    && /opt/kooper/bin/python -m compileall -q /opt/kooper/lib \
    && /opt/kooper/bin/python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('kmock', 'matplotlib', 'pyspark')))"

# Last stage: the default target is the operator.
FROM runtime AS operator
COPY --from=build-operator /opt/kooper /opt/kooper
EXPOSE 8080 9090
# No --namespace: every namespace (the chart passes --namespace to watch only its own).
CMD ["run", "--metrics-port", "9090", "--health-port", "8080"]
