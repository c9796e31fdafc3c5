"""Each backend and model against sentence-transformers on the same texts."""

from __future__ import annotations

import numpy as np
import pytest

from citeweave.embedder.v1 import embedder_pb2
from services.embedder.backends import cuda_available
from services.embedder.models import MINILM, MPNET
from tests.conftest import running_service

from embedder_helpers import row_cosines


def _served_and_reference(tmp_path, embed, stub_for, reference, texts, settings):
    with running_service("embedder", tmp_path, settings, timeout_s=600) as service:
        info = stub_for(service).GetModelInfo(embedder_pb2.GetModelInfoRequest())
        vectors, response = embed(service, texts, timeout=600)
    assert response.model_name == settings["model"]
    return info, vectors, reference(settings["model"], texts)


@pytest.mark.slow
def test_mpnet_onnx_agrees_with_sentence_transformers(
    tmp_path, embed, stub_for, reference, mixed_texts
):
    info, vectors, expected = _served_and_reference(
        tmp_path, embed, stub_for, reference, mixed_texts, {"model": MPNET, "backend": "onnx"}
    )
    assert (info.backend, info.dimension, info.max_seq_length) == ("onnx-cpu", 768, 384)
    assert vectors.shape == (len(mixed_texts), 768)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert row_cosines(vectors, expected).min() >= 0.999


def test_torch_backend_on_cpu_agrees(tmp_path, embed, stub_for, reference, mixed_texts):
    info, vectors, expected = _served_and_reference(
        tmp_path, embed, stub_for, reference, mixed_texts, {"model": MINILM, "backend": "torch"}
    )
    assert info.backend == ("torch-cuda" if cuda_available() else "torch-cpu")
    assert row_cosines(vectors, expected).min() >= 0.999


def test_int8_backend_is_close_but_opt_in(tmp_path, embed, stub_for, reference, mixed_texts):
    info, vectors, expected = _served_and_reference(
        tmp_path, embed, stub_for, reference, mixed_texts, {"model": MINILM, "backend": "onnx-int8"}
    )
    assert info.backend == "onnx-cpu-int8"
    cosines = row_cosines(vectors, expected)
    # Selective quantization (feed-forward outputs kept fp32): ~0.99, measurably below fp32.
    assert cosines.min() >= 0.98 and cosines.mean() < 0.9999


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs CUDA")
def test_torch_on_cuda_agrees(tmp_path, embed, stub_for, reference, mixed_texts):
    info, vectors, expected = _served_and_reference(
        tmp_path, embed, stub_for, reference, mixed_texts, {"model": MPNET, "backend": "auto"}
    )
    assert info.backend == "torch-cuda"
    assert row_cosines(vectors, expected).min() >= 0.999  # fp16 on the GPU
