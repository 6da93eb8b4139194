"""`validate`'s check of what the release card says about training, against the release's own files:

- the `hard-negatives` paragraph's "Negatives by source, per split:" counts and shares are the `negative_sources` of
  each split's rows (builder/release/card_statements.py `negatives_sentence`), wherever the card says it;
- the mteb note's corpus (what `researchy-subq texts` brings) names the judged documents and the never-judged
  negatives by their counts (builder/release/ranking_documents.py), not "the judged documents only".
"""

from __future__ import annotations

from pathlib import Path

from builder.release.card_statements import NEGATIVES_LEAD, negatives_sentence
from builder.release.layout import SPLITS, config
from builder.release.ranking_documents import negatives_by_split, ranking_documents, ranking_sentence
from builder.release.validate.card_statements import check_statement, folded

TRAINING_STATEMENTS = "the card's training statements (negatives by source, the texts users bring) are the data's"
MTEB_CORPUS = "`researchy-subq texts` writes from your licensed ClueWeb22-B copy ("


def check_training_statements(release: Path, body: str, check) -> None:
    release = Path(release)
    if not any(config("hard-negatives").files(release, split) for split in SPLITS):
        check.skip("no hard-negatives config")
        return
    check_statement(
        folded(body), "the negatives by source", NEGATIVES_LEAD, negatives_sentence(negatives_by_split(release)), check
    )
    if MTEB_CORPUS in body:
        sentence = ranking_sentence(ranking_documents(release))
        if MTEB_CORPUS + sentence not in body:
            stated = body.split(MTEB_CORPUS, 1)[1].split(", as the judge", 1)[0]
            check.fail(f"README.md: the mteb corpus is stated as ({stated}); the release's files give ({sentence})")
