"""`validate`'s re-derivation of every judgment column that other columns determine, per row, in its streaming
pass over the judgment files: a release edited and re-sealed (checksums, sizes, row counts and statistics made
consistent again) still cannot state a level its judge's output does not give.

- generate mode: `level` and `status` are what the prompt's parser gives for `raw` (the prompt the manifest
  names, by id and sha256; a hash the kit does not know means the parser is unknown: a failure, not a guess);
  r3a keeps the intent before the answer and may turn an `ok` grade into `not_verbatim` (its extract is checked
  against the document, which a release does not hold); the bi-encoder stand-in's level is the number of the
  profile's cut points its stated cosine reaches;
- distribution mode: `probs` has one probability per level of the scale, each in [0, 1], summing to 1 within
  TOLERANCE; `level` is their argmax as stored, the lowest level on a tie (as generation/judging/judges.py
  `distribution` picks it); `expected` is sum p x level; `raw` is the level's digit;
- every mode: a level is set exactly for the graded statuses (`ok`, `imported`), and is on the prompt's scale;
- provenance: `source` is what the profile's pool rule admits first given `bm25_rank`, `rerank_rank` and
  `clicked` (generation/provenance.py); a rank outside 1..the profile's depth, or a row no rule admits, is an error.

Statuses no rule derives from `raw` are listed in UNDERIVABLE with what they require instead (`engine_error`:
no level, no probabilities; `request_failed`: no level, the error in raw; `imported`: raw null). A release of
imported labels (`import-labels`; the manifest's `imported`, checked against the import's own account by
builder/release/imported.py) has no prompt of its own: its rows' text, where the files had some (OpenAI Batch
answers), is re-derived with the profile prompt's parser the importer used, rows without text are not; and it
carries no pool provenance (ranks and source null).

Each failure is one report line per file and kind: the first offending row (its position in the file, subq_id
and docid) and how many rows of the file share it.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from generation.judging.parsing import cut_level, r3a_answer, stand_in_cosine
from generation.judging.prompts import Prompt, get_prompt
from generation.provenance import admitted_by
from generation.schema import GRADED_STATUSES, IMPORTED_STATUS, JUDGMENT_STATUSES, OTHER_TEXT_STATUS

TOLERANCE = 1e-4  # |sum(probs) - 1| and |expected - sum p x level|: float32 storage is ~1e-7 off
STAND_IN_ROUNDING = 5e-5  # the stand-in's raw states its cosine to 4 decimals
UNDERIVABLE = {"engine_error": "the engine failed: no level and no probabilities",
               # a served request that failed (generation/judging/judges.py) or a batch error line keeps the
               # error in raw, which no parser reads; the authors' "-2" is one too
               "request_failed": "the request failed: no level, raw holds the error",
               IMPORTED_STATUS: "a level imported without the judge's text: raw null",
               OTHER_TEXT_STATUS: "an imported level graded on another document's text: raw null"}
COLUMNS = ["subq_id", "docid", "level", "raw", "status", "probs", "expected", "bm25_rank", "rerank_rank", "clicked",
           "source", "extract_verbatim"]
CHECKS = {
    "level": "level and status are what the judge's rule gives for raw (the manifest's prompt), never ok off the scale",
    "distribution": "distribution mode: probs sum to 1, level is their argmax, expected is sum p x level",
    "provenance": "source is what the profile's pool rule admits first; ranks within the profile's depths",
}


class FileFindings:
    """Per file: the first offending row and the count of each kind of failure, reported as one line each."""

    def __init__(self, checks: dict):
        self.checks, self.found = checks, {}

    def add(self, check: str, kind: str, bad: np.ndarray, table: pa.Table, offset: int, describe=None) -> None:
        count = int(np.count_nonzero(bad))
        if not count:
            return
        if (check, kind) not in self.found:
            row = int(np.flatnonzero(bad)[0])
            detail = f": {describe(row)}" if describe else ""
            self.found[(check, kind)] = [f"row {offset + row} (subq_id {table['subq_id'][row]}, docid "
                                         f"{table['docid'][row]}){detail}", 0]
        self.found[(check, kind)][1] += count

    def flush(self, name: str) -> None:
        for (check, kind), (first, count) in self.found.items():
            self.checks[check].fail(f"{name}: {kind}, first at {first} ({count:,} rows)", count)
        self.found = {}


def as_numpy(column, fill) -> np.ndarray:
    return column.fill_null(fill).to_numpy(zero_copy_only=False)


STATUS = {s: i for i, s in enumerate(JUDGMENT_STATUSES)}
NOT_STAND_IN = -2  # a parsed code: the raw is not what the stand-in writes


def status_codes(column) -> np.ndarray:
    """Each row's status as its position in schema.JUDGMENT_STATUSES; -1 for anything else (null included)."""
    return as_numpy(pc.index_in(column, value_set=pa.array(JUDGMENT_STATUSES)), -1).astype(np.int16)


class Rederivation:
    """Set up from the manifest and profile once; `add` per record batch, `end_file` after each file."""

    def __init__(self, manifest: dict, profile, report):
        self.checks = {key: report.check(name) for key, name in CHECKS.items()}
        self.findings = FileFindings(self.checks)
        self.imported = bool(manifest.get("imported"))
        self.profile, self.cache = profile, {}
        self.prompt = get_prompt(profile.judge.prompt) if self.imported and profile is not None \
            else self._prompt(manifest, profile)
        judge = profile.judge if profile is not None else None
        # imported batch answers were parsed as the judge's text answers are, whatever the profile's mode
        self.rule = None if judge is None or self.prompt is None else "generate" if self.imported else (
            "stand-in" if judge.backend == "bi-encoder" else judge.mode)
        if profile is None:
            for check in self.checks.values():
                check.note = "no valid profile in the manifest: not checked"
        if self.rule != "distribution":
            self.checks["distribution"].note = "not distribution mode"

    def _prompt(self, manifest: dict, profile) -> Prompt | None:
        stated = manifest.get("prompt") if isinstance(manifest.get("prompt"), dict) else {}
        check = self.checks["level"]
        try:
            prompt = get_prompt(str(stated.get("id")))
        except KeyError:
            check.fail(f"manifest.json: prompt {stated.get('id')!r} is none of the kit's: its parser is unknown")
            return None
        if prompt.sha256 != stated.get("sha256"):
            check.fail(f"manifest.json: prompt {prompt.id} has sha256 {stated.get('sha256')}, the kit's {prompt.id} has "
                       f"{prompt.sha256}: the judgments' parser is not this kit's")
            return None
        if profile is not None and profile.judge.prompt != prompt.id:
            check.fail(f"manifest.json: prompt {prompt.id}, but its profile's judge uses {profile.judge.prompt}")
            return None
        return prompt

    def add(self, table: pa.Table, offset: int) -> None:
        if self.profile is None:
            return
        self._provenance(table, offset)
        if self.rule is None:
            return
        level = as_numpy(table["level"].cast(pa.int16()), -1)
        status = status_codes(table["status"])
        ok = np.isin(status, [STATUS[s] for s in GRADED_STATUSES])
        underivable = np.isin(status, [STATUS[s] for s in UNDERIVABLE])
        no_text = as_numpy(pc.is_null(table["raw"]), True)
        self.findings.add("level", f"status {IMPORTED_STATUS} with the judge's text (an imported level has none)",
                          np.isin(status, [STATUS[IMPORTED_STATUS], STATUS[OTHER_TEXT_STATUS]]) & ~no_text, table,
                          offset)
        if self.imported:  # a labels file without text: nothing to re-derive (the import's account of them is
            # checked by builder/release/imported.py)
            underivable = underivable | no_text
        self.findings.add("level", f"a status that is none of {', '.join(JUDGMENT_STATUSES)}", status < 0, table,
                          offset, lambda r: f"status {table['status'][r]}")
        self._scale(table, offset, level, ok, underivable)
        if self.rule == "distribution":
            self._distribution(table, offset, level, ok, underivable)
        else:
            self._generate(table, offset, level, status, underivable)

    def end_file(self, name: str) -> None:
        self.findings.flush(name)

    def _scale(self, table, offset, level, ok, underivable) -> None:
        add = self.findings.add
        graded = "/".join(GRADED_STATUSES)
        add("level", f"status {graded} without a level", ok & (level < 0), table, offset)
        add("level", f"a level with a status other than {graded}", ~ok & (level >= 0), table, offset,
            lambda r: f"level {level[r]}, status {table['status'][r]}")
        add("level", f"a level off the prompt's scale 0-{self.prompt.max_level}",
            ok & (level > self.prompt.max_level), table, offset, lambda r: f"level {level[r]}")
        has_probs = as_numpy(pc.is_valid(table["probs"]), False) | as_numpy(pc.is_valid(table["expected"]), False)
        add("level", "probabilities with a level not from a distribution (an engine error, an imported level)",
            underivable & has_probs, table, offset)

    def _parsed(self, raw: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row: the level (-1: none), status code and second acceptable level (-1: none) its raw gives,
        each distinct raw parsed once by the judge's own rule (NOT_STAND_IN: not a stand-in's raw)."""
        encoded = pc.dictionary_encode(raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw)
        values = encoded.dictionary.to_pylist() + [None]
        parsed = [self.cache.get(v) or self._parse(v) for v in values]
        if len(self.cache) < 100_000:
            self.cache.update(zip(values, parsed))
        codes = encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)
        return tuple(np.array([p[i] for p in parsed], np.int16)[codes] for i in range(3))

    def _parse(self, raw: str | None) -> tuple[int, int, int]:
        if self.rule == "stand-in":
            cosine = stand_in_cosine(raw)
            if cosine is None:
                return NOT_STAND_IN, NOT_STAND_IN, NOT_STAND_IN
            cuts = self.profile.judge.cut_points or []
            low, high = (cut_level(cosine + d, cuts) for d in (-STAND_IN_ROUNDING, STAND_IN_ROUNDING))
            return low, STATUS["ok"], high
        parsed = self.prompt.parse(r3a_answer(raw) if self.prompt.id == "r3a" else raw)
        level = -1 if parsed.level is None else parsed.level
        # r3a: an ok grade whose extract is not in the document becomes not_verbatim (level null)
        return level, STATUS[parsed.status], (-1 if self.prompt.id == "r3a" and parsed.status == "ok" else level)

    def _generate(self, table, offset, level, stored, underivable) -> None:
        add = self.findings.add
        expected, status, other = self._parsed(table["raw"])
        if self.rule == "stand-in":
            add("level", "raw is not a stand-in judgment (stand-in bi-encoder cosine=...)", expected == NOT_STAND_IN,
                table, offset)
        r3a_cut = (other == -1) & (level == -1) & (stored == STATUS["not_verbatim"]) & (status == STATUS["ok"])
        in_range = (level >= np.minimum(expected, other)) & (level <= np.maximum(expected, other))
        same = ((level == expected) | (in_range & (self.rule == "stand-in"))) & (stored == status)
        bad = ~underivable & (expected != NOT_STAND_IN) & ~(same | r3a_cut)
        add("level", "level/status not what raw parses to", bad, table, offset, lambda r: (
            f"raw {table['raw'][r].as_py()!r:.60} gives level {_level(expected[r])} ({JUDGMENT_STATUSES[status[r]]}), "
            f"stored {_level(level[r])} ({table['status'][r]})"))
        if self.prompt.id == "r3a":
            verbatim = as_numpy(table["extract_verbatim"].cast(pa.int8()), -1)
            add("level", "extract_verbatim disagrees with the status (ok: true, not_verbatim: false)",
                ((stored == STATUS["ok"]) & (verbatim != 1)) | ((stored == STATUS["not_verbatim"]) & (verbatim != 0)),
                table, offset)
        add("level", "generate mode with probabilities", as_numpy(pc.is_valid(table["probs"]), False)
            | as_numpy(pc.is_valid(table["expected"]), False), table, offset)

    def _distribution(self, table, offset, level, ok, underivable) -> None:
        add, levels = self.findings.add, self.prompt.max_level + 1
        add("distribution", "a status other than ok or engine_error (distribution mode never leaves a level unset)",
            ~ok & ~underivable, table, offset, lambda r: f"status {table['status'][r]}")
        lengths = as_numpy(pc.list_value_length(table["probs"]), -1)
        add("distribution", f"probs missing or not {levels} values", ok & (lengths != levels), table, offset,
            lambda r: f"{lengths[r]} values")
        rows = np.flatnonzero(ok & (lengths == levels))
        if not len(rows):
            return
        part = table.take(pa.array(rows))
        probs = np.asarray(pc.list_flatten(part["probs"]).to_numpy(zero_copy_only=False), np.float64)
        probs = probs.reshape(len(rows), levels)
        finite = np.isfinite(probs).all(axis=1) & (probs >= 0).all(axis=1) & (probs <= 1).all(axis=1)
        total = np.where(finite, probs.sum(axis=1), np.nan)
        expected = as_numpy(part["expected"].cast(pa.float64()), math.nan)
        mean = (probs * np.arange(levels)).sum(axis=1)
        argmax = np.argmax(np.where(np.isnan(probs), -np.inf, probs.astype(np.float32)), axis=1)

        def spread(mask):
            out = np.zeros(table.num_rows, bool)
            out[rows[mask]] = True
            return out

        add("distribution", "probs not each in [0, 1]", spread(~finite), table, offset)
        add("distribution", f"probs do not sum to 1 (within {TOLERANCE:g})", spread(finite & ~(
            np.abs(total - 1) <= TOLERANCE)), table, offset, lambda r: f"sum {probs[np.searchsorted(rows, r)].sum():.6f}")
        add("distribution", "level is not the argmax of probs (the lowest level on a tie)",
            spread(finite & (argmax != level[rows])), table, offset,
            lambda r: f"level {level[r]}, argmax {argmax[np.searchsorted(rows, r)]}")
        add("distribution", f"expected is not sum p x level (within {TOLERANCE:g})", spread(finite & ~(
            np.abs(expected - mean) <= TOLERANCE)), table, offset,
            lambda r: f"expected {expected[np.searchsorted(rows, r)]:.4f}, sum p x level "
                      f"{mean[np.searchsorted(rows, r)]:.4f}")
        digit = pc.equal(part["raw"], pc.cast(part["level"], pa.string())).fill_null(False).to_numpy(zero_copy_only=False)
        add("distribution", "raw is not the level's digit", spread(~digit), table, offset,
            lambda r: f"raw {table['raw'][r]}, level {level[r]}")

    def _provenance(self, table, offset) -> None:
        add, bm25, rerank, pool = self.findings.add, self.profile.bm25, self.profile.rerank, self.profile.pool
        if self.imported:
            made = as_numpy(pc.is_valid(table["bm25_rank"]), False) | as_numpy(pc.is_valid(table["rerank_rank"]), False) \
                | as_numpy(pc.is_valid(table["source"]), False)
            add("provenance", "pool provenance on an imported label (the kit made no pool: ranks and source are null)",
                made, table, offset)
            return
        for column, depth, section in (("bm25_rank", bm25.depth, "bm25"), ("rerank_rank", rerank.depth, "rerank")):
            ranks = as_numpy(table[column].cast(pa.int64()), 1)
            add("provenance", f"{column} outside 1..{section}.depth {depth}", (ranks < 1) | (ranks > depth), table,
                offset, lambda r, ranks=ranks: f"{column} {ranks[r]}")
        derived = admitted_by(table["bm25_rank"], table["rerank_rank"], table["clicked"], pool)
        nothing = as_numpy(pc.is_null(derived), True)
        add("provenance", f"no pool rule admits it (BM25 rank > {pool.bm25_top}, rerank rank > {pool.rerank_top}"
            f"{', not clicked' if pool.include_clicked else ''})", nothing, table, offset,
            lambda r: f"bm25_rank {table['bm25_rank'][r]}, rerank_rank {table['rerank_rank'][r]}, "
                      f"clicked {table['clicked'][r]}")
        differs = ~nothing & ~as_numpy(pc.equal(table["source"], derived), False)
        add("provenance", "source is not what the pool rule admits first", differs, table, offset,
            lambda r: f"source {table['source'][r]}, the rule gives {derived[r]}")


def _level(value: int) -> str:
    return "null" if value < 0 else str(value)
