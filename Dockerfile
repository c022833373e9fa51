# syntax=docker/dockerfile:1
# The gpucap daemon's image.
#
#   docker build -t gpucap .                           # every cloud's SDK (EXTRAS=all)
#   docker build -t gpucap:aws --build-arg EXTRAS=aws .  # only boto3: no GCP or OCI SDK
#   docker run -v /etc/gpucap:/etc/gpucap:ro -e GPUCAP_DB_URL=postgresql://... gpucap
#
# EXTRAS is a comma-separated list of the package's extras (aws, gcp, oci, all). An account
# on a cloud whose SDK the image lacks fails alone, with a message naming the extra.
# Nothing secret is built in: the database URL, the ExternalId secret and the API token come
# from the environment or mounted files at run time (README, "Packaging").

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: gpucap's wheel and a wheel of every dependency at the pinned versions, so the
# runtime stage installs offline and carries no build tool.
FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS=all
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY . .
RUN pip wheel --wheel-dir /wheels --constraint constraints.txt ".[${EXTRAS}]"

# ---- runtime: the interpreter, the installed wheels, an unprivileged user.
FROM ${PYTHON_IMAGE} AS runtime
ARG EXTRAS=all
LABEL org.opencontainers.image.title="gpucap" \
      org.opencontainers.image.description="Multi-cloud GPU capacity control plane (daemon)" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GPUCAP_STATE_DIR=/var/lib/gpucap
RUN groupadd --system --gid 10001 gpucap \
    && useradd --system --uid 10001 --gid gpucap --home-dir /var/lib/gpucap --no-create-home \
       --shell /usr/sbin/nologin gpucap \
    && install -d -o gpucap -g gpucap -m 0700 /var/lib/gpucap \
    && install -d -m 0755 /etc/gpucap
# Installed from the build stage's wheels through a bind mount: no layer keeps them. pip
# compiles the bytecode now, so the daemon runs on a read-only root filesystem. DL3013
# (pin versions): --no-index, the only versions there are the ones constraints.txt pinned.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "gpucap[${EXTRAS}]"

# Numeric, so Kubernetes' runAsNonRoot can check it.
USER 10001:10001
WORKDIR /var/lib/gpucap
# gRPC API; HTTP: /metrics, /healthz, /readyz, node phase reports (daemon.yaml's grpc.addr
# and metrics_addr; bind them to 0.0.0.0 to reach them from outside the container).
EXPOSE 50051 9464
# Liveness, as the Helm chart's probe: 200 while the daemon serves HTTP.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "controlplane.healthcheck", "--config", "/etc/gpucap/daemon.yaml"]
# `docker run IMAGE` runs the daemon; `docker run IMAGE account check FILE` any other command.
ENTRYPOINT ["gpucap"]
CMD ["daemon", "--config", "/etc/gpucap/daemon.yaml"]
