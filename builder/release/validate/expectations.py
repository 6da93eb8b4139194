"""`validate --expect FILE`: level-share bounds, read strictly (a misspelt key must not switch a bound off).

    levels: {5: [low, high], ..., 0: [low, high]}   # shares of the graded judgments of a split
    unparsed_max: 0.001                             # share of unparsed ('Other') judgments
    tolerance: 0.05                                 # with --against: how far a share may move
    min_judgments: 5000                             # splits smaller than this are not held to `levels`

A share measured on n judgments has a standard error near sqrt(p(1-p)/n) and judgments of one question
are correlated, so a 4-question test split says nothing about the level mix: `min_judgments` states which
splits are large enough, and the report says which were left out.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from generation.profiles.profile import UniqueKeyLoader

KEYS = {"levels", "unparsed_max", "tolerance", "min_judgments"}
LEVELS = {0, 1, 2, 3, 4, 5}


class ExpectationError(ValueError):
    pass


def _share(path: Path, key: str, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ExpectationError(f"{path}: {key}: expected a share in [0, 1], got {value!r}")
    return float(value)


def load_expectations(path: Path | None) -> dict:
    """The bounds of `path` (none when None), or an ExpectationError naming the file and key."""
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise ExpectationError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=UniqueKeyLoader)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ExpectationError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise ExpectationError(f"{path}: expected a mapping with keys {sorted(KEYS)}")
    unknown = set(data) - KEYS
    if unknown:
        raise ExpectationError(f"{path}: unknown keys {sorted(map(str, unknown))}; known: {sorted(KEYS)}")
    bounds: dict = {}
    if "levels" in data:
        levels = data["levels"]
        if not isinstance(levels, dict) or not levels:
            raise ExpectationError(f"{path}: levels: expected a mapping level -> [low, high]")
        bounds["levels"] = {}
        for level, pair in levels.items():
            if level not in LEVELS:
                raise ExpectationError(f"{path}: levels: {level!r} is not a level (0..5)")
            if not isinstance(pair, list) or len(pair) != 2:
                raise ExpectationError(f"{path}: levels.{level}: expected [low, high], got {pair!r}")
            low, high = (_share(path, f"levels.{level}", v) for v in pair)
            if low > high:
                raise ExpectationError(f"{path}: levels.{level}: low {low} > high {high}")
            bounds["levels"][str(level)] = (low, high)
    for key in ("unparsed_max", "tolerance"):
        if key in data:
            bounds[key] = _share(path, key, data[key])
    if "min_judgments" in data:
        n = data["min_judgments"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ExpectationError(f"{path}: min_judgments: expected a count >= 0, got {n!r}")
        bounds["min_judgments"] = n
    return bounds
