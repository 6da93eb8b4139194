"""Turning a judge's text into a level, the authors' way, and the R3A format and extract checks."""
from __future__ import annotations

import re
from dataclasses import dataclass

FIRST_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Parsed:
    level: int | None  # None = unparsed ("Other" in the paper's Table 1)
    extract: str | None = None
    intent: str | None = None
    status: str = "ok"  # one of schema.JUDGMENT_STATUSES: why level is None


def parse_first_digit(text: str, max_level: int = 5) -> Parsed:
    """The authors' rule: the first digit anywhere in the output ("10" -> 1, "-1" -> 1); no digit -> unparsed.
    A first digit above the scale (6-9) is also unparsed, so every stored level is on the scale."""
    match = FIRST_DIGIT.search(text or "")
    if match is None:
        return Parsed(None, status="no_digit")
    level = int(match.group())
    return Parsed(level) if level <= max_level else Parsed(None, status="out_of_scale")


def _tag(text: str, name: str) -> str | None:
    match = re.search(rf"<{name}>(.*?)</{name}>", text or "", flags=re.S)
    return match.group(1).strip() if match else None


def _score(text: str) -> int | None:
    value = _tag(text, "score")
    if value is None or not re.fullmatch(r"\[?\s*[012]\s*\]?", value):
        return None
    return int(re.search(r"[012]", value).group())


def parse_umbrela(text: str) -> Parsed:
    """<think> ... </think> <score> 0/1/2 </score>; anything else is unparsed."""
    return Parsed(_score(text))


def parse_r3a(text: str) -> Parsed:
    """<think> ... </think> <extract> fragment or none </extract> <score> 0/1/2 </score>."""
    if _tag(text, "think") is None:
        return Parsed(None, _tag(text, "extract"))
    return Parsed(_score(text), _tag(text, "extract"))


def parse_intent(text: str) -> str | None:
    return _tag(text, "intent")


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
