# syntax=docker/dockerfile:1
# citeweave sync: corpus ingest, incremental update and BERTopic topics.
# Build from the repository root: docker build -f deploy/docker/sync.Dockerfile -t citeweave/sync:0.1.0 .
# Writes: the unfinished-sync marker, the fitted topic model and numba's compiled-code
# cache under /var/lib/citeweave/sync (one volume: the topic model must outlive the pod,
# and a kept numba cache spares minutes of JIT on every start), temporary files under /tmp.
# The corpus file a Sync call names is read from the pod's file system: mount it read-only.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- builder: the pinned dependencies of pyproject.toml in a venv -------------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
WORKDIR /build
# Only the dependency list: this layer is rebuilt when pyproject.toml changes, not on every code change.
COPY pyproject.toml deploy/docker/requirements.py ./
# torch first, the CPU wheel from the PyTorch index (--no-deps: its dependencies come from PyPI
# with the rest); on PyPI the same version is the CUDA build and pulls several GB of CUDA packages.
# --only-binary: every dependency ships a wheel, so no compiler is needed here either.
RUN python requirements.py pyproject.toml --only torch > torch.txt \
 && python requirements.py pyproject.toml > requirements.txt \
 && pip install --only-binary=:all: --no-deps --index-url https://download.pytorch.org/whl/cpu -r torch.txt \
 && pip install --only-binary=:all: -r requirements.txt \
 && pip check

# ---- runtime: slim Python, the venv and the source, no build tools -------------------------------
FROM ${PYTHON_IMAGE} AS runtime
# A fixed numeric UID, so Kubernetes' runAsNonRoot can verify it and volume ownership (fsGroup) is
# predictable.
RUN groupadd --system --gid 10001 citeweave \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin citeweave
COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
# The source stays a checkout-shaped tree (not a site-packages install): services.embedder.models
# reads pyproject.toml next to services/, and PYTHONPATH names the two package roots that
# pyproject's [tool.setuptools.packages.find] names (the stubs import as `citeweave.<svc>.v1`).
COPY pyproject.toml ./
COPY services/ ./services/
# Bytecode compiled now: the root file system is read-only at run time.
RUN /opt/venv/bin/python -m compileall -q /app/services
# The state directory exists and belongs to the service user, so a plain `docker run` works;
# on Kubernetes a volume is mounted over it (the root file system is read-only).
RUN mkdir -p /var/lib/citeweave/sync && chown -R 10001:10001 /var/lib/citeweave/sync
# HOME=/tmp: anything that defaults to ~ writes to the writable /tmp (an emptyDir), not to /.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app:/app/services/common \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    HOME=/tmp \
    CITEWEAVE_SYNC_HOST=0.0.0.0 \
    CITEWEAVE_SYNC_STATE_DIR=/var/lib/citeweave/sync/state \
    CITEWEAVE_SYNC_TOPIC_MODEL_DIR=/var/lib/citeweave/sync/topics \
    CITEWEAVE_SYNC_DOWNLOAD_DIR=/var/lib/citeweave/sync/downloads \
    NUMBA_CACHE_DIR=/var/lib/citeweave/sync/numba
USER 10001:10001
EXPOSE 50055
ENTRYPOINT ["python", "-m", "services.sync"]
