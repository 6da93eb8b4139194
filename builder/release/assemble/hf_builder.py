"""A `datasets` builder (ArrowBasedBuilder) that builds the release's configs on a user's machine from
the same inputs as `build-release`: judgment shard folders and question folders.

    builder = ResearchySubqJudgments(config_name="level-5", judgments=["work/judgments"],
                                     questions=["work/questions/train", "work/questions/test"])
    builder.download_and_prepare()
    dataset = builder.as_dataset()
"""

from __future__ import annotations

from pathlib import Path

import datasets
import pyarrow.compute as pc

from builder.release.assemble import configs, training_configs
from builder.release.assemble.data_files import (
    judgment_inputs,
    load_questions,
    present,
    qrels_of,
    route,
    topic_index,
    with_complexity,
)
from builder.release.layout import CONFIGS, DEFAULT_CONFIG, PARTITIONS, binary_threshold, config
from generation.profiles.profile import load_profile
from generation.storage.schema import arrow_schema, features

DERIVED = ("queries", "qrels-binary", "diversity-qrels", "corpus-ids")


class ResearchySubqConfig(datasets.BuilderConfig):
    def __init__(self, *args, judgments=(), questions=(), profile="paper", **kwargs):
        super().__init__(*args, **kwargs)
        self.judgments = tuple(str(p) for p in judgments)
        self.questions = tuple(str(p) for p in questions)
        self.profile = profile  # its complexity thresholds fill the questions' analysis columns


class ResearchySubqJudgments(datasets.ArrowBasedBuilder):
    BUILDER_CONFIG_CLASS = ResearchySubqConfig
    BUILDER_CONFIGS = [ResearchySubqConfig(name=c.name, description=c.description) for c in CONFIGS]
    DEFAULT_CONFIG_NAME = DEFAULT_CONFIG

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=config(self.config.name).description, features=features(config(self.config.name).table)
        )

    def _split_generators(self, dl_manager):
        if not self.config.questions:
            raise ValueError("pass questions=[folders from `researchy-subq questions`] (and judgments=[...])")
        questions, _ = self._questions()
        return [datasets.SplitGenerator(name=s, gen_kwargs={"split": s}) for s in present(questions)]

    def _questions(self):
        """The question tables with the dev split carved from train, as `build-release` does."""
        questions, subquestions = load_questions([Path(p) for p in self.config.questions])
        return training_configs.with_dev_split(questions, load_profile(self.config.profile).training), subquestions

    def _generate_tables(self, split: str):
        spec = config(self.config.name)
        questions, subquestions = self._questions()
        schema = arrow_schema(spec.table)
        splits = present(questions)
        index = topic_index(questions, subquestions, splits)
        files = judgment_inputs([Path(p) for p in self.config.judgments])
        if spec.table == "questions":
            settings = load_profile(self.config.profile).complexity
            table = with_complexity(questions, index, files, settings)
            yield 0, table.filter(pc.equal(table["split"], split)).cast(schema)
            return
        if spec.table == "subquestions":
            qids = questions.filter(pc.equal(questions["split"], split))["qid"]
            yield 0, subquestions.filter(pc.is_in(subquestions["qid"], value_set=qids)).cast(schema)
            return
        if spec.name in DERIVED:
            yield from self._derived_tables(spec, split, questions, subquestions, index, files)
            return
        key, code = 0, splits.index(split)
        if spec.name in training_configs.CONFIGS:
            yield from self._training_tables(spec, code, subquestions, index, files)
            return
        # One pass per partition, so rows come in the order the release's files are read.
        for folder in spec.folders if spec.table == "judgments" else ("judgments/*",):
            partition = PARTITIONS.index(folder.split("/")[-1]) if spec.table == "judgments" else None
            for _, routed in route(files, index):
                table = routed.graded(code) if spec.table == "qrels" else routed.rows(code, partition).table
                if spec.table == "qrels":
                    table = qrels_of(table)
                if table.num_rows:
                    yield key, table.cast(schema)
                    key += 1

    def _training_tables(self, spec, code: int, subquestions, index, files):
        """As `build-release` writes them (`training_configs.TrainingWriters`)."""
        profile = load_profile(self.config.profile)
        rows = training_configs.TrainingRows(
            subquestions, index.split_of_subquestions(), profile.complexity.answer_level, profile.training
        )
        for _, routed in route(files, index):
            rows.add(routed.batch.table, routed.batch.subquestion)
        for key, (split_code, name, table) in enumerate(rows.tables()):
            if split_code == code and name == spec.name:
                yield key, training_configs.conformed(name, table)

    def _derived_tables(self, spec, split: str, questions, subquestions, index, files):
        """As `build-release` writes them (`release.DerivedConfigs`)."""
        in_split = questions.filter(pc.equal(questions["split"], split))
        split_subqs = subquestions.filter(pc.is_in(subquestions["qid"], value_set=in_split["qid"]))
        if spec.name == "queries":
            yield 0, configs.queries(split_subqs)
            return
        numbers, docs = configs.Subtopics(split_subqs), configs.CorpusIds(in_split)
        threshold = binary_threshold(load_profile(self.config.profile))
        key, code = 0, present(questions).index(split)
        for _, routed in route(files, index):  # input order, as build-release writes them
            part = routed.rows(code).table
            if part.num_rows == 0:
                continue
            if spec.name == "corpus-ids":
                docs.add(part)
                continue
            table = (
                configs.binary_qrels(part, threshold)
                if spec.name == "qrels-binary"
                else configs.diversity_qrels(part, numbers)
            )
            if table.num_rows:
                yield key, table
                key += 1
        if spec.name == "corpus-ids":
            for key, table in enumerate(docs.tables()):
                yield key, table
