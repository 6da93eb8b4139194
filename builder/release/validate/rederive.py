"""`validate`'s re-derivation of every judgment column that other columns determine, per row, in its streaming
pass over the judgment files: a release edited and re-sealed (checksums, sizes, row counts and statistics made
consistent again) still cannot state a level its judge's output does not give.

- generate mode: `level` and `status` are what the prompt's parser gives for `raw` (the prompt the manifest
  names, by id and sha256; a hash the kit does not know means the parser is unknown: a failure, not a guess);
  r3a keeps the intent before the answer and may turn an `ok` grade into `not_verbatim` (its extract is checked
  against the document, which a release does not hold); the bi-encoder stand-in's level is the number of the
  profile's cut points its stated cosine reaches;
- distribution mode (rederive_distribution.py): `probs` has one probability per level of the scale, each in
  [0, 1], summing to 1 within its TOLERANCE; `level` is their argmax as stored, the lowest level on a tie (as
  generation/judging/judges.py `distribution` picks it); `expected` is sum p x level; `raw` is the level's digit;
- every mode: a level is set exactly for the graded statuses (`ok`, `imported`), and is on the prompt's scale;
- provenance (rederive_provenance.py): `source` is what the profile's pool rule admits first given `bm25_rank`, `rerank_rank` and
  `clicked` (generation/stages/pool.py); a rank outside 1..the profile's depth, or a row no rule admits, is an error.

Statuses no rule derives from `raw` are listed in UNDERIVABLE with what they require instead (`engine_error`:
no level, no probabilities; `request_failed`: no level, the error in raw; `imported`: raw null). A release of
imported labels (`import-labels`; the manifest's `imported`, checked against the import's own account by
builder/release/validate/imported.py) has no prompt of its own: its rows' text, where the files had some (OpenAI Batch
answers), is re-derived with the profile prompt's parser the importer used, rows without text are not; and it
carries no pool provenance (ranks and source null).

Each failure is one report line per file and kind (rederive_findings.py): the first offending row (its position
in the file, subq_id and docid) and how many rows of the file share it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.contract import PromptRef
from builder.release.validate.rederive_distribution import check_distribution
from builder.release.validate.rederive_findings import FileFindings, as_numpy
from builder.release.validate.rederive_provenance import check_provenance
from generation.judging.parsing import cut_level, r3a_answer, stand_in_cosine
from generation.judging.prompts import Prompt, get_prompt
from generation.storage.schema import (
    GRADED_STATUSES,
    IMPORTED_STATUS,
    JUDGMENT_STATUSES,
    LEVEL_STATUSES,
    OTHER_TEXT_STATUS,
)

STAND_IN_ROUNDING = 5e-5  # the stand-in's raw states its cosine to 4 decimals
UNDERIVABLE = {
    "engine_error": "the engine failed: no level and no probabilities",
    # a served request that failed (generation/judging/judges.py) or a batch error line keeps the
    # error in raw, which no parser reads; the authors' "-2" is one too
    "request_failed": "the request failed: no level, raw holds the error",
    IMPORTED_STATUS: "a level imported without the judge's text: raw null",
    OTHER_TEXT_STATUS: "an imported rating graded on another document's text: raw null",
}
COLUMNS = [
    "subq_id",
    "docid",
    "level",
    "raw",
    "status",
    "probs",
    "expected",
    "bm25_rank",
    "rerank_rank",
    "clicked",
    "source",
    "extract_verbatim",
]
CHECKS = {
    "level": "level and status are what the judge's rule gives for raw (the manifest's prompt), never ok off the scale",
    "distribution": "distribution mode: probs sum to 1, level is their argmax, expected is sum p x level",
    "provenance": "source is what the profile's pool rule admits first; ranks within the profile's depths",
}


STATUS = {s: i for i, s in enumerate(JUDGMENT_STATUSES)}
NOT_STAND_IN = -2  # a parsed code: the raw is not what the stand-in writes


def status_codes(column) -> np.ndarray:
    """Each row's status as its position in schema.JUDGMENT_STATUSES; -1 for anything else (null included)."""
    return as_numpy(pc.index_in(column, value_set=pa.array(JUDGMENT_STATUSES)), -1).astype(np.int16)


class Rederivation:
    """Set up from the manifest and profile once; `add` per record batch, `end_file` after each file."""

    def __init__(self, stated: PromptRef | None, imported: bool, profile, report):
        """`stated`: the manifest's prompt; `imported`: the manifest records an import."""
        self.checks = {key: report.check(name) for key, name in CHECKS.items()}
        self.findings = FileFindings(self.checks)
        self.imported = imported
        self.profile = profile
        self.cache: dict[str | None, tuple[int, int, int]] = {}  # a raw -> what `_parse` gives for it
        self.prompt = (
            get_prompt(profile.judge.prompt) if self.imported and profile is not None else self._prompt(stated, profile)
        )
        judge = profile.judge if profile is not None else None
        # imported batch answers were parsed as the judge's text answers are, whatever the profile's mode
        self.rule = (
            None
            if judge is None or self.prompt is None
            else "generate"
            if self.imported
            else ("stand-in" if judge.backend == "bi-encoder" else judge.mode)
        )
        if profile is None:
            for check in self.checks.values():
                check.skip("no valid profile in the manifest")
        if self.rule != "distribution":
            self.checks["distribution"].skip(f"not distribution mode (the judge's rule: {self.rule or 'unknown'})")

    def _prompt(self, stated: PromptRef | None, profile) -> Prompt | None:
        check = self.checks["level"]
        try:
            prompt = get_prompt(str(stated and stated.id))
        except KeyError:
            check.fail(f"manifest.json: prompt {stated and stated.id!r} is none of the kit's: its parser is unknown")
            return None
        if stated is None or prompt.sha256 != stated.sha256:
            check.fail(
                f"manifest.json: prompt {prompt.id} has sha256 {stated and stated.sha256}, the kit's {prompt.id} has "
                f"{prompt.sha256}: the judgments' parser is not this kit's"
            )
            return None
        if profile is not None and profile.judge.prompt != prompt.id:
            check.fail(f"manifest.json: prompt {prompt.id}, but its profile's judge uses {profile.judge.prompt}")
            return None
        return prompt

    def add(self, table: pa.Table, offset: int) -> None:
        if self.profile is None:
            return
        check_provenance(self.findings, self.profile, self.imported, table, offset)
        if self.rule is None or self.prompt is None:  # no rule without a prompt (__init__)
            return
        prompt = self.prompt
        level = as_numpy(table["level"].cast(pa.int16()), -1)
        status = status_codes(table["status"])
        ok = np.isin(status, [STATUS[s] for s in GRADED_STATUSES])
        underivable = np.isin(status, [STATUS[s] for s in UNDERIVABLE])
        no_text = as_numpy(pc.is_null(table["raw"]), True)
        self.findings.add(
            "level",
            f"status {IMPORTED_STATUS} with the judge's text (an imported level has none)",
            np.isin(status, [STATUS[IMPORTED_STATUS], STATUS[OTHER_TEXT_STATUS]]) & ~no_text,
            table,
            offset,
        )
        if self.imported:  # a labels file without text: nothing to re-derive (the import's account of them is
            # checked by builder/release/validate/imported.py)
            underivable = underivable | no_text
        self.findings.add(
            "level",
            f"a status that is none of {', '.join(JUDGMENT_STATUSES)}",
            status < 0,
            table,
            offset,
            lambda r: f"status {table['status'][r]}",
        )
        self._scale(prompt, table, offset, level, status, ok, underivable)
        if self.rule == "distribution":
            check_distribution(self.findings, prompt.max_level, table, offset, level, ok, underivable)
        else:
            self._generate(prompt, table, offset, level, status, underivable)

    def end_file(self, name: str) -> None:
        self.findings.flush(name)

    def _scale(self, prompt: Prompt, table, offset, level, status, ok, underivable) -> None:
        add = self.findings.add
        graded = "/".join(GRADED_STATUSES)
        needs_level = np.isin(status, [STATUS[s] for s in LEVEL_STATUSES])
        add("level", f"status {'/'.join(LEVEL_STATUSES)} without a level", needs_level & (level < 0), table, offset)
        add(
            "level",
            f"a level with a status other than {graded}",
            ~ok & (level >= 0),
            table,
            offset,
            lambda r: f"level {level[r]}, status {table['status'][r]}",
        )
        add(
            "level",
            f"a level off the prompt's scale 0-{prompt.max_level}",
            ok & (level > prompt.max_level),
            table,
            offset,
            lambda r: f"level {level[r]}",
        )
        has_probs = as_numpy(pc.is_valid(table["probs"]), False) | as_numpy(pc.is_valid(table["expected"]), False)
        add(
            "level",
            "probabilities with a level not from a distribution (an engine error, an imported level)",
            underivable & has_probs,
            table,
            offset,
        )

    def _parsed(self, prompt: Prompt, raw: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row: the level (-1: none), status code and second acceptable level (-1: none) its raw gives,
        each distinct raw parsed once by the judge's own rule (NOT_STAND_IN: not a stand-in's raw)."""
        encoded = pc.dictionary_encode(raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw)
        values = encoded.dictionary.to_pylist() + [None]
        parsed = [self.cache.get(v) or self._parse(prompt, v) for v in values]
        if len(self.cache) < 100_000:
            self.cache.update(zip(values, parsed))
        codes = encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)
        return tuple(np.array([p[i] for p in parsed], np.int16)[codes] for i in range(3))

    def _parse(self, prompt: Prompt, raw: str | None) -> tuple[int, int, int]:
        if self.rule == "stand-in":
            cosine = stand_in_cosine(raw)
            if cosine is None:
                return NOT_STAND_IN, NOT_STAND_IN, NOT_STAND_IN
            cuts = self.profile.judge.cut_points or []
            low, high = (cut_level(cosine + d, cuts) for d in (-STAND_IN_ROUNDING, STAND_IN_ROUNDING))
            return low, STATUS["ok"], high
        # a null raw parses as an empty answer, as every parser takes it
        parsed = prompt.parse(r3a_answer(raw) if prompt.id == "r3a" else raw or "")
        level = -1 if parsed.level is None else parsed.level
        # r3a: an ok grade whose extract is not in the document becomes not_verbatim (level null)
        return level, STATUS[parsed.status], (-1 if prompt.id == "r3a" and parsed.status == "ok" else level)

    def _generate(self, prompt: Prompt, table, offset, level, stored, underivable) -> None:
        add = self.findings.add
        expected, status, other = self._parsed(prompt, table["raw"])
        if self.rule == "stand-in":
            add(
                "level",
                "raw is not a stand-in judgment (stand-in bi-encoder cosine=...)",
                expected == NOT_STAND_IN,
                table,
                offset,
            )
        r3a_cut = (other == -1) & (level == -1) & (stored == STATUS["not_verbatim"]) & (status == STATUS["ok"])
        in_range = (level >= np.minimum(expected, other)) & (level <= np.maximum(expected, other))
        same = ((level == expected) | (in_range & (self.rule == "stand-in"))) & (stored == status)
        bad = ~underivable & (expected != NOT_STAND_IN) & ~(same | r3a_cut)
        add(
            "level",
            "level/status not what raw parses to",
            bad,
            table,
            offset,
            lambda r: (
                f"raw {table['raw'][r].as_py()!r:.60} gives level {_level(expected[r])} ({JUDGMENT_STATUSES[status[r]]}), "
                f"stored {_level(level[r])} ({table['status'][r]})"
            ),
        )
        if prompt.id == "r3a":
            verbatim = as_numpy(table["extract_verbatim"].cast(pa.int8()), -1)
            add(
                "level",
                "extract_verbatim disagrees with the status (ok: true, not_verbatim: false)",
                ((stored == STATUS["ok"]) & (verbatim != 1)) | ((stored == STATUS["not_verbatim"]) & (verbatim != 0)),
                table,
                offset,
            )
        add(
            "level",
            "generate mode with probabilities",
            as_numpy(pc.is_valid(table["probs"]), False) | as_numpy(pc.is_valid(table["expected"]), False),
            table,
            offset,
        )


def _level(value: int) -> str:
    return "null" if value < 0 else str(value)
