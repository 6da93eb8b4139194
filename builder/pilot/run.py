"""`researchy-subq pilot`: measure what a change of judge setting does to the labels before paying for it.

Two settings, A (the reference) and B (the candidate), judge the same question-stratified sample of pairs
(generation/pilot/sample.py). Each setting's judgments are the judge stage's, cut to the sample
(generation/pilot/judge_stage.py), in `OUT/a` and `OUT/b`: sharded, chunked and resumable as `judge` is. When every
shard of both is complete, the pilot measures their agreement, prices both at the paper's scale with `plan`, states
a verdict and writes the pilot record (`OUT/pilot.json`, builder/pilot/record.py) that `build-release
--pilot` carries into a release.
"""

from __future__ import annotations

from pathlib import Path

from builder.pasteable import profile_argument
from builder.pilot.contract import PilotGpuHours, PilotRecord, PilotSample
from builder.pilot.measures import measure_agreement, paper_bill, read_setting, saving
from builder.pilot.options import PilotOptions
from builder.pilot.record import KIND, PILOT_RECORD, record_json, setting_record
from builder.pilot.stability import label_stability
from builder.pilot.verdict import decide
from generation import __version__
from generation.errors import ArgumentError
from generation.notices import warn
from generation.pilot.judge_stage import PilotJudgeStage
from generation.pilot.sample import SAMPLE_FILE, read_population, sample_for
from generation.pilot.settings import Setting, check_batch_comparison, check_comparable, judge_differences
from generation.stages.judge_record import JudgeSummary
from generation.stages.pool import PoolStage
from generation.storage.atomic_files import clean_stale_tmp, refuse_links_under, write_text_atomic
from generation.storage.shards import Shard, ShardError, sha256_file


def check_settings(a: Setting, b: Setting, options: PilotOptions) -> list[str]:
    """Refuses what cannot be compared (generation/pilot/settings.py); the notes on what will be compared."""
    check_comparable(a, b)
    level = options.positives_at(a)
    if not 1 <= level <= a.max_level:
        raise ArgumentError(f"--answer-level {level}: a level of the settings' scale 1..{a.max_level}")
    notes = [a.shares_document_prefix(), b.shares_document_prefix()]
    stability_check = check_batch_comparison(a, b)
    if stability_check:
        notes.append(stability_check)
    if not judge_differences(a, b):
        notes.append("A and B set the same judge: the pilot measures only how the judge agrees with itself")
    return notes


class Pilot:
    """One invocation on one shard: `prepare` (checks and the sample), `judge` each setting, then `finish` (the
    record, once every shard of both settings is done). `run_pilot` does all three."""

    def __init__(self, options: PilotOptions, shard: Shard = Shard()):
        self.options, self.shard = options, shard
        self.settings = options.settings()
        self.notes = check_settings(*self.settings, options)
        self.summaries: dict[str, JudgeSummary] = {}
        self.profiles: dict[str, str] = {}
        self.definition: dict = {}
        self.sample = options.out / SAMPLE_FILE  # drawn or read back by `prepare`
        self.waiting: str | None = None

    def prepare(self) -> dict:
        """The notes said, the candidates checked against A's profile, the sample drawn or read back: its definition."""
        for line in self.notes:
            warn(f"pilot: {line}")
        options = self.options
        refuse_links_under(options.out)  # `OUT/a` a link to a user's folder: refused before anything is written
        clean_stale_tmp(options.out, [SAMPLE_FILE, PILOT_RECORD])  # what a killed pilot left (a live one's kept)
        candidate_files = PoolStage.completed_files(options.candidates, self.settings[0].profile)
        population = read_population(options.subquestions, candidate_files, options.candidates)
        _, self.definition, self.sample = sample_for(options.out, population, options.request)
        return self.definition

    def stage(self, setting: Setting) -> PilotJudgeStage:
        options = self.options
        return PilotJudgeStage(
            setting.profile,
            options.out / setting.folder,
            options.subquestions,
            options.candidates,
            options.index,
            self.sample,
        )

    def judge(self, setting: Setting, progress=None) -> JudgeSummary:
        """This shard of the sample judged under `setting`; its profile written beside its judgments (the `--profile`
        of `judge` and `build-release` for these settings: `profiles`)."""
        self.summaries[setting.label] = summary = self.stage(setting).run(self.shard, progress)
        self.profiles[setting.label] = profile_argument(setting.profile, self.options.out / setting.folder)
        return summary

    def finish(self) -> PilotRecord | None:
        """The pilot record, written to OUT/pilot.json, once every shard of both settings is done; else None (and
        `waiting` says what is missing)."""
        try:
            tables = {}
            for setting in self.settings:
                stage = self.stage(setting)
                tables[setting.label] = read_setting(stage.out, stage.output().config_hash)
        except ShardError as e:
            self.waiting = f"the report waits for the other shards ({e})"
            return None
        a, b = self.settings
        record = pilot_record(a, b, self.options, self.definition, self.sample, tables, self.notes)
        write_text_atomic(self.options.out / PILOT_RECORD, record_json(record))
        return record


def run_pilot(options: PilotOptions, shard: Shard = Shard()) -> tuple[Pilot, PilotRecord | None]:
    """This shard of the sample judged under A, then B; the record when every shard of both is done."""
    pilot = Pilot(options, shard)
    pilot.prepare()
    for setting in pilot.settings:
        pilot.judge(setting)
    return pilot, pilot.finish()


def pilot_record(
    a: Setting,
    b: Setting,
    options: PilotOptions,
    definition: dict,
    sample: Path,
    tables: dict,
    notes: list[str],
) -> PilotRecord:
    """The pilot record (its fields: builder/pilot/contract.py `PilotRecord`)."""
    answer_level = options.positives_at(a)
    agreement = measure_agreement(
        tables["A"], tables["B"], a.max_level, answer_level, options.resamples, options.request.seed, options.weights
    )
    bills = {
        s.label: paper_bill(s, options.subquestions, options.candidates, options.index, options.plan_sample)
        for s in (a, b)
    }
    return PilotRecord(
        record=KIND,
        schema_version=1,
        code_version=__version__,
        settings={"A": setting_record(a), "B": setting_record(b)},
        differences=judge_differences(a, b),
        sample=PilotSample.model_validate(
            {**definition, "file": sample.name, "sha256": sha256_file(sample)}, strict=True
        ),
        agreement=agreement,
        stability=label_stability(tables["A"], tables["B"]),
        gpu_hours=PilotGpuHours(A=bills["A"], B=bills["B"], saved=saving(bills["A"], bills["B"])),
        verdict=decide(agreement, options.rule(answer_level)),
        notes=notes,
    )
