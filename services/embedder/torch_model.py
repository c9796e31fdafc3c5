"""The sentence-transformers model as one torch module: transformer, mean pooling, L2 norm.

The same module is exported to ONNX and run by the torch backend, so both compute exactly
what `SentenceTransformer.encode(normalize_embeddings=True)` computes. Imported only when torch
is needed: an ONNX replica with a cached export never loads torch.
"""

from __future__ import annotations

import torch
from torch import nn

from services.embedder.models import ModelSpec


class PooledEncoder(nn.Module):
    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.transformer = transformer

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask)
        tokens = hidden.last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
        # Same epsilon as sentence-transformers' Pooling, so padded rows cannot divide by zero.
        mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return nn.functional.normalize(mean, p=2, dim=1)


def load_pooled_encoder(spec: ModelSpec, device: str = "cpu") -> PooledEncoder:
    """Loads the weights through sentence-transformers so they are the ones it would use."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(spec.path), device=device)
    return PooledEncoder(model[0].auto_model).to(device).eval()
