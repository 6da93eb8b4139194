"""`validate`'s check of the card's statements of an order, a scope, a kind and a method, against what the data and
validate's own re-derivation give. Each statement has a lead (the words every statement of it begins with); every
place the card (whitespace folded) says the lead must go on as the statement rendered here
(builder/release/card_statements.py), so a wrong statement added beside a right one is found too:

- the graded lists' order ("level descending, ..."): the order validate re-derived the `graded-lists` rows in and
  found them in (training_reference.py LIST_ORDER);
- the kind of each source of hard negatives ("`judged`: ...", in the card's fill order): its words at the manifest's
  `negative_level`;
- the scope of the positives count ("Over all splits, ..."): the manifest's training record, which the training
  check re-derives from the judgments;
- where the judgments without a level are ("Outputs without a usable digit ..."): the `unparsed` rows of each split,
  or the config left out.

The negatives by source of each split are checked with the training statements (training_statements.py), through
`check_statement`; the completeness quartiles and their method with the statistics section, verbatim (card.py).
"""

from __future__ import annotations

import re

from builder.release.card_statements import (
    GRADED_LIST_LEAD,
    POSITIVES_LEAD,
    UNPARSED_LEAD,
    order_text,
    positives_sentence,
    source_kinds,
    unparsed_sentence,
)
from builder.release.contract import Manifest
from builder.release.validate.training_reference import LIST_ORDER

CARD_STATEMENTS = "the card's statements of an order, a scope, a kind and a method are what the data and the code give"


def folded(body: str) -> str:
    """The card's text with every run of whitespace one space: a statement may wrap across lines."""
    return " ".join(body.split())


def check_statement(text: str, what: str, lead: str, expected: str, check, required: bool = True) -> None:
    """Every place `text` (folded) says `lead` goes on as `expected`; with `required`, there is one."""
    places = [m.start() for m in re.finditer(re.escape(lead), text)]
    if required and not places:
        check.fail(f"README.md does not state {what} (expected {expected!r})")
    for at in places:
        said = text[at : at + len(expected)]
        if said != expected:
            check.fail(f"README.md states {what} as {said!r}; the data gives {expected!r}")


def check_card_statements(body: str, manifest: Manifest, rows: dict, splits: list[str], check) -> None:
    text = folded(body)
    published = {name for name, by_split in rows.items() if any(by_split.values())}
    check_statement(
        text, "the graded lists' order", GRADED_LIST_LEAD, order_text(LIST_ORDER), check, "graded-lists" in published
    )
    training = manifest.training
    if training is not None:
        hard_negatives = "hard-negatives" in published
        for source, kind in source_kinds(training.negative_level).items():
            lead = f"`{source}`: "
            check_statement(
                text,
                f"what a `{source}` negative is",
                lead,
                lead + kind,
                check,
                hard_negatives and source in training.fill_order,
            )
        check_statement(
            text,
            "the positives with a hard-negatives row",
            POSITIVES_LEAD,
            positives_sentence(training.positives, training.short_positives, training.negatives),
            check,
        )
    unparsed = {split: rows.get("unparsed", {}).get(split, 0) for split in splits}
    check_statement(text, "where the unparsed judgments are", UNPARSED_LEAD, unparsed_sentence(unparsed), check)
