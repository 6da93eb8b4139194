"""Turning a judge's text into a level and a status, the authors' way, and the R3A format and extract checks.

Every parse returns a `status` from `schema.JUDGMENT_STATUSES`: `ok` with a level on the prompt's scale, or
why the level is null.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

# DylanJoo/crux crux/augmentation/gen_ratings.py lines 113-115: `re.findall(re.compile(r"\d|-\d"), o + "-1")[0]`,
# then `int(...)`: the first digit or negative digit of the output; the appended "-1" is what an output without
# a digit yields. crux/llm/litellm_api.py lines 68-69: a failed request returns the string "-2" as its output.
AUTHORS_PATTERN = re.compile(r"\d|-\d")
NO_DIGIT_SENTINEL = "-1"
REQUEST_FAILED_SENTINEL = "-2"


@dataclass(frozen=True)
class Parsed:
    level: int | None  # None = unparsed ("Other" in the paper's Table 1)
    extract: str | None = None
    intent: str | None = None
    status: str = "ok"  # one of schema.JUDGMENT_STATUSES: why level is None


def parse_first_digit(text: str, max_level: int = 5) -> Parsed:
    """The authors' rule, classified. Their value is the first match of AUTHORS_PATTERN in text + "-1": "10" -> 1, "-3" -> -3,
    "7" -> 7, no digit -> -1. A level is kept only on the scale 0..max_level; otherwise it is null and the status
    says why: `no_digit` (their appended "-1" matched), `request_failed` (the whole output is their failure
    sentinel "-2"), `negative` (a negative digit came first, e.g. "-3", or a literal "-1"), `out_of_scale`
    (a first digit above the scale, e.g. "7" on 0-5)."""
    text = text or ""
    if text.strip() == REQUEST_FAILED_SENTINEL:
        return Parsed(None, status="request_failed")
    match = AUTHORS_PATTERN.search(text + NO_DIGIT_SENTINEL)
    if match is None or match.start() >= len(text):  # only the appended sentinel matched: the output has no digit
        return Parsed(None, status="no_digit")
    value = int(match.group())
    if value < 0:
        return Parsed(None, status="negative")
    if value > max_level:
        return Parsed(None, status="out_of_scale")
    return Parsed(value)


@lru_cache(maxsize=4096)  # a few distinct values, tens of millions of calls in a full-size import
def classify_rating(value: int, max_level: int = 5, authors_sentinels: bool = True) -> Parsed:
    """A level that was parsed elsewhere, as the rule above classifies it, with `imported` for a level on the scale
    (there is no text to re-derive it from). With `authors_sentinels` (the authors' ratings files, where each value
    is `int(re.findall(r"\\d|-\\d", output + "-1")[0])`, or -2 for a failed request), -1 is their no-digit value and
    -2 their failed request; a graded qrels file has no such convention, so there any negative value is `negative`."""
    if 0 <= value <= max_level:
        return Parsed(value, status="imported")
    if authors_sentinels and value == int(NO_DIGIT_SENTINEL):
        return Parsed(None, status="no_digit")
    if authors_sentinels and value == int(REQUEST_FAILED_SENTINEL):
        return Parsed(None, status="request_failed")
    return Parsed(None, status="negative" if value < 0 else "out_of_scale")


def _tag(text: str, name: str) -> str | None:
    match = re.search(rf"<{name}>(.*?)</{name}>", text or "", flags=re.S)
    return match.group(1).strip() if match else None


def _score(text: str, max_level: int = 2) -> Parsed:
    """The <score> tag: "[1]", " 2 " and the like; a digit above the scale is out_of_scale, no digit no_digit."""
    value = _tag(text, "score")
    digit = re.fullmatch(r"\[?\s*(\d)\s*\]?", value) if value is not None else None
    if digit is None:
        return Parsed(None, status="no_digit")
    level = int(digit.group(1))
    return Parsed(level) if level <= max_level else Parsed(None, status="out_of_scale")


def parse_umbrela(text: str) -> Parsed:
    """<think> ... </think> <score> 0/1/2 </score>; anything else is unparsed."""
    return _score(text)


def parse_r3a(text: str) -> Parsed:
    """<think> ... </think> <extract> fragment or none </extract> <score> 0/1/2 </score>. The extract is checked
    against the document by `check_r3a_extract`."""
    if _tag(text, "think") is None:
        return Parsed(None, _tag(text, "extract"), status="no_digit")
    return replace(_score(text), extract=_tag(text, "extract"))


def check_r3a_extract(parsed: Parsed, document: str) -> Parsed:
    """R3A (Yuan et al., arXiv:2508.02506) section 2.2, "Reward Function": the reward is I_format x r_score, granted only when the output meets
    every format and extraction requirement, so an extract that is not verbatim in the document is a format
    failure: the level is null and the status `not_verbatim`, whatever the score said."""
    if parsed.status != "ok" or extract_is_verbatim(parsed.extract, document):
        return parsed
    return replace(parsed, level=None, status="not_verbatim")


def parse_intent(text: str) -> str | None:
    return _tag(text, "intent")


def r3a_raw(intent: str, answer: str) -> str:
    """What an r3a judgment keeps as `raw`: round one's intent, then round two's answer."""
    return f"<intent>{intent}</intent>\n{answer}"


def r3a_answer(raw: str | None) -> str:
    """Round two's answer out of an r3a `raw` (the intent holds no "</intent>": `parse_intent` stops at the first)."""
    text = raw or ""
    return text.split("</intent>\n", 1)[1] if text.startswith("<intent>") and "</intent>\n" in text else text


# The bi-encoder stand-in judge (generation/judging/judges.py BiEncoderJudge): raw states the cosine, and the
# level is how many of the profile's cut points it reaches.
STAND_IN_RAW = "stand-in bi-encoder cosine={:.4f}"
STAND_IN_PATTERN = re.compile(r"stand-in bi-encoder cosine=(-?\d+\.\d{4})")


def cut_level(cosine: float, cut_points) -> int:
    return sum(cosine >= cut for cut in cut_points)


def stand_in_cosine(raw: str | None) -> float | None:
    """The cosine a stand-in judgment's raw states (rounded to 4 decimals), or None when raw is not one."""
    match = STAND_IN_PATTERN.fullmatch(raw or "")
    return float(match.group(1)) if match else None


def normalise_space(text: str) -> str:
    return " ".join(text.split())


def extract_is_verbatim(extract: str | None, document: str) -> bool:
    """R3A's check: the extract is "None" or a whitespace-normalised substring of the document."""
    if extract is None:
        return False
    cleaned = extract.strip().strip("[]").strip()
    if cleaned.lower() == "none":
        return True
    return bool(cleaned) and normalise_space(cleaned) in normalise_space(document)
