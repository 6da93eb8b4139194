"""validate's own derivation of two derived configs' columns, apart from build-release's (assemble/configs.py): the
`subtopic` of `diversity-qrels` (a running count per question) and the `url` of `corpus-ids` (the smallest URL of a
document's click records, from a dict of the questions' clicks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa


def subtopic_numbers(question: np.ndarray) -> np.ndarray:
    """Per sub-question position, its 1-based position among its question's sub-questions, in table order
    (validate's own count: a running count per question)."""
    return pd.Series(question).groupby(question).cumcount().to_numpy(np.int64) + 1


def clicked_urls(questions: pa.Table) -> dict[str, str]:
    """url_hash -> the URL a release gives it: of the questions' click records, the smallest when two differ."""
    urls: dict[str, str] = {}
    for clicked in questions["clicked"].to_pylist():
        for record in clicked or ():
            known = urls.get(record["url_hash"])
            if record["url"] is not None and (known is None or record["url"] < known):
                urls[record["url_hash"]] = record["url"]
    return urls


def urls_of(url_hash: pa.ChunkedArray | pa.Array, urls: dict[str, str]) -> pa.Array:
    return pa.array([urls.get(h) for h in url_hash.to_pylist()], pa.string())
