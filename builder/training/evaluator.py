"""The kit's graded retrieval measure (builder/training/measure.py) as a sentence-transformers evaluator, so the
trainer evaluates dev while it trains and keeps the best checkpoint by it.

sentence-transformers' trainer calls `evaluator(model, output_path, epoch, steps)` at each evaluation and prefixes
the returned keys with "eval_" (sentence_transformers/base/trainer.py `evaluation_loop`); `prefix_name_to_metrics`
puts the evaluator's name in front first. So the primary metric of the evaluator named "dev" is
`eval_dev_ndcg@10`, the key `metric_for_best_model` names. Its InformationRetrievalEvaluator is not used: its nDCG
is binary (a document is relevant or not), where the release's levels are graded gains, as trec_eval and the
card's mteb task use them.
"""

from __future__ import annotations

from pathlib import Path

from sentence_transformers.base.evaluation import BaseEvaluator

from builder.training.measure import METRICS, RankingSet, SplitScores, measure_splits

PRIMARY = "ndcg@10"  # over sub-questions, gain = the level
KEYS = dict(zip(METRICS, (PRIMARY, "alpha-ndcg@10_questions", "ndcg@10_questions")))


class GradedRetrievalEvaluator(BaseEvaluator):
    def __init__(self, release: Path, split: str, ranking: RankingSet, answer_level: int, depth: int):
        super().__init__()
        self.release, self.name, self.ranking = Path(release), split, ranking
        self.answer_level, self.depth = answer_level, depth
        self.primary_metric = PRIMARY
        self.last: SplitScores = {}  # measure_splits' whole result of the last call

    def __call__(self, model, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        self.last = measure_splits(model, self.release, [self.name], self.ranking, self.answer_level, self.depth)[
            self.name
        ]
        metrics = self.prefix_name_to_metrics({KEYS[m]: self.last[m] for m in METRICS}, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics

    def get_config_dict(self) -> dict:
        return {
            "split": self.name,
            "ranking": self.ranking.kind,
            "depth": self.depth,
            "answer_level": self.answer_level,
        }


def metric_for_best_model(evaluator: GradedRetrievalEvaluator) -> str:
    return f"eval_{evaluator.name}_{PRIMARY}"
