"""`validate`'s check of what the release card says about training, against the release's own files:

- the `hard-negatives` paragraph's "Negatives by source:" counts are the `negative_sources` of its rows, every split;
- the mteb note's corpus (what `researchy-subq texts` brings) names the judged documents and the never-judged
  negatives by their counts (builder/release/ranking_documents.py), not "the judged documents only".
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.layout import SPLITS, config
from builder.release.ranking_documents import BATCH_ROWS, ranking_documents, ranking_sentence

TRAINING_STATEMENTS = "the card's training statements (negatives by source, the texts users bring) are the data's"
NEGATIVES_BY_SOURCE = re.compile(r"Negatives by source:((?:\s+`\w+` [\d,]+[,.])+)")
SOURCE_COUNT = re.compile(r"`(\w+)` ([\d,]+)")
MTEB_CORPUS = "`researchy-subq texts` writes from your licensed ClueWeb22-B copy ("


def negatives_by_source(release: Path) -> Counter:
    counts: Counter = Counter()
    for split in SPLITS:
        for path in config("hard-negatives").files(release, split):
            for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=["negative_sources"]):
                sources = pc.list_flatten(batch.column(0))
                counts.update({s["values"]: s["counts"] for s in pc.value_counts(sources).to_pylist()})
    return counts


def check_training_statements(release: Path, body: str, check) -> None:
    release = Path(release)
    if not any(config("hard-negatives").files(release, split) for split in SPLITS):
        check.skip("no hard-negatives config")
        return
    counts = negatives_by_source(release)
    found = NEGATIVES_BY_SOURCE.search(body)
    if found is None:
        check.fail("README.md: no 'Negatives by source:' sentence for the hard-negatives config")
    else:
        stated = {source: int(n.replace(",", "")) for source, n in SOURCE_COUNT.findall(found.group(1))}
        data = {source: counts.get(source, 0) for source in sorted(set(stated) | set(counts))}
        if {source: stated.get(source, 0) for source in data} != data:
            check.fail(f"README.md: negatives by source {stated}, the hard-negatives rows hold {data}")
    if MTEB_CORPUS in body:
        sentence = ranking_sentence(ranking_documents(release))
        if MTEB_CORPUS + sentence not in body:
            stated = body.split(MTEB_CORPUS, 1)[1].split(", as the judge", 1)[0]
            check.fail(f"README.md: the mteb corpus is stated as ({stated}); the release's files give ({sentence})")
