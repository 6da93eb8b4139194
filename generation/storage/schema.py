"""Every column of every table the kit reads or writes, defined once.

The Arrow schemas (what the stages write with pyarrow) and the `datasets.Features` (what
`load_dataset` reports) are both derived from `TABLES`, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True


# Researchy Questions' DocStream `Click_Cnt` is a float: the dataset card says "The click preferences in the
# DocStream are normalized to be a probability distribution" (0.6, 0.25, ...). Stored as the share it is.
RETRIEVED_DOC = pa.struct(
    [
        pa.field("docid", pa.string(), nullable=False),
        pa.field("bm25_rank", pa.int32()),
        pa.field("rerank_rank", pa.int32()),
    ]
)
CLICKED_DOC = pa.struct(
    [
        pa.field("url_hash", pa.string()),
        pa.field("url", pa.string()),
        pa.field("click_share", pa.float32()),
    ]
)

# What became of a judged pair. `ok`: a level on the scale, parsed from `raw`; `imported`: a level on the scale
# that came from a labels file without the judge's text (`import-labels`, generation/stages/import_labels.py), so
# `raw` is null and there is nothing to re-derive it from. The authors' parser
# (`re.findall(r"\d|-\d", output + "-1")[0]`, crux/augmentation/gen_ratings.py) yields a first digit, a
# negative digit or the "-1" it appended; their request failure is the string "-2". Every other class
# keeps level null and is counted in the summary, the card and `validate`.
IMPORTED_STATUS = "imported"
# An imported rating of the authors that their clicked-document pass obtained on another document's text
# (generation/labels/authors_pass.py: a defect of crux/augmentation/gen_ratings_offload_qrel.py lines 82-91): its
# level when the rating had one, null for their -1, -2 or 7.
OTHER_TEXT_STATUS = "imported_other_text"
IMPORTED_STATUSES = (IMPORTED_STATUS, OTHER_TEXT_STATUS)  # ratings imported without the judge's text
LEVEL_STATUSES = ("ok", IMPORTED_STATUS)  # the statuses whose level is never null
GRADED_STATUSES = (*LEVEL_STATUSES, OTHER_TEXT_STATUS)  # the statuses a level comes with
JUDGMENT_STATUSES = (
    "ok",  # a level on the prompt's scale, parsed from raw
    IMPORTED_STATUS,  # a level on the scale imported from a labels file; raw is null
    "no_digit",  # no digit in the output (the authors' "-1")
    "negative",  # a negative digit first, e.g. "-3"
    "out_of_scale",  # a first digit above the scale, e.g. "7"
    "request_failed",  # the authors' "-2": the request itself failed
    "engine_error",  # the engine refused or failed this pair; `raw` holds the error text
    "not_verbatim",  # r3a: the <extract> is not verbatim in the document (R3A's format failure, arXiv:2508.02506 section 2.2)
    OTHER_TEXT_STATUS,  # an imported rating graded on another document's text (the authors' defect), level or not
)

SOURCE_SPLITS = ("train", "test")  # Researchy Questions' own splits, what `questions --split` takes
# A release's splits: Researchy's, plus `dev`, carved from train by a hash of the question id
# (builder/release/assemble/training_configs.py `dev_questions`), so a model is chosen without looking at test.
SPLITS = ("train", "dev", "test")
CORPUS = "corpus"  # the corpus stage's table, the name of its shard files
JUDGMENTS = "judgments"  # the judge stage's table, the name of its shard files

RANK_COLUMNS = (
    Column("bm25_rank", pa.int32(), "1-based rank in the question's BM25 run; null when BM25 did not retrieve it"),
    Column("rerank_rank", pa.int32(), "1-based rank after reranking; null when it was not reranked"),
    Column("clicked", pa.bool_(), "the document was clicked for the question in Researchy Questions", False),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "questions": (
        Column("qid", pa.string(), "Researchy Questions id", False),
        Column("question", pa.string(), "the original question text", False),
        Column(
            "split",
            pa.string(),
            "Researchy Questions split: train or test; in a release, dev for the train "
            "questions the training section's dev_share carves out",
            False,
        ),
        Column("clicked", pa.list_(CLICKED_DOC), "clicked ClueWeb22 documents, most-clicked first (DocStream)", False),
        Column(
            "answerable",
            pa.bool_(),
            "one candidate answers every sub-question (level >= the profile's); null before judging",
        ),
        Column("answerable_share", pa.float32(), "share of sub-questions some candidate answers"),
        Column(
            "completeness",
            pa.float32(),
            "mean over answering candidates of log(m)/log(K): m of the K sub-questions it answers (level >= answer_level)",
        ),
        Column(
            "retrieval_complex",
            pa.bool_(),
            "not answerable by one document and incomplete (Gabburo et al., arXiv:2406.03592)",
        ),
        Column(
            "retrieved_unjudged",
            pa.list_(RETRIEVED_DOC),
            "documents the question's BM25 and reranker runs retrieved that no judgment covers (left out of the "
            "pool), hardest first (rerank rank, then BM25 rank, then docid), at most training.retrieved_kept; null "
            "when the release was built without the runs",
        ),
    ),
    "subquestions": (
        Column("subq_id", pa.string(), "{qid}-{k}, k = 0-based position in gpt4_decomposition.subquestions", False),
        Column("qid", pa.string(), "the question this sub-question decomposes", False),
        Column("text", pa.string(), "sub-question text without its leading '- '", False),
        Column("header", pa.string(), "the header question it sits under in gpt4_decomposition.headers"),
        Column("depth", pa.int8(), "1 = a header question, 2 = a bullet under a header; null when not in headers"),
    ),
    "corpus": (
        Column("docid", pa.string(), "ClueWeb22-ID, e.g. clueweb22-en0000-00-00000", False),
        Column(
            "url_hash",
            pa.string(),
            "ClueWeb22 URL-hash (= Researchy CluewebURLHash), 32 upper-case hex; "
            "null for plain JSONL documents without a URL",
        ),
        Column("url", pa.string(), "document URL"),
        Column("text", pa.string(), "Clean-Text; never published (ClueWeb22 licence)", False),
    ),
    "runs": (
        Column("qid", pa.string(), "question id", False),
        Column("docid", pa.string(), "ClueWeb22-ID", False),
        Column("rank", pa.int32(), "1-based rank", False),
        Column("score", pa.float32(), "retrieval or reranker score", False),
        Column("stage", pa.string(), "bm25 or rerank", False),
    ),
    "candidates": (
        Column("qid", pa.string(), "question id", False),
        Column("docid", pa.string(), "ClueWeb22-ID", False),
        Column("url_hash", pa.string(), "ClueWeb22 URL-hash"),
        *RANK_COLUMNS,
        Column(
            "click_share",
            pa.float32(),
            "the document's share of the question's clicks (DocStream Click_Cnt, "
            "normalised to a distribution); null when not clicked",
        ),
        Column("source", pa.string(), "what admitted it to the pool first: bm25, rerank or clicked", False),
    ),
    "judgments": (
        Column("subq_id", pa.string(), "sub-question id", False),
        Column("qid", pa.string(), "question id", False),
        Column("docid", pa.string(), "ClueWeb22-ID of the judged document", False),
        Column("url_hash", pa.string(), "ClueWeb22 URL-hash of the judged document"),
        Column("level", pa.int8(), "graded relevance 0-5; null when the judge's output had no digit ('Other')"),
        Column(
            "raw",
            pa.string(),
            "the judge's raw output text (the error text when status is engine_error or "
            "request_failed); null for labels imported without their text",
        ),
        Column(
            "status",
            pa.string(),
            "ok (a level parsed from raw), imported (a level imported without raw text), "
            "imported_other_text (an imported rating the authors' code graded on another document's text; "
            "level null for their -1, -2 and 7), "
            "or why level is null: " + ", ".join(s for s in JUDGMENT_STATUSES if s not in GRADED_STATUSES),
        ),
        Column(
            "probs", pa.list_(pa.float32()), "probability of each level 0..max under the judge; null in generate mode"
        ),
        Column("expected", pa.float32(), "sum of p(level) x level; null in generate mode"),
        *RANK_COLUMNS,
        Column(
            "source",
            pa.string(),
            "what admitted the document to the pool first: bm25, rerank or clicked; "
            "null for imported labels (no pool provenance)",
        ),
        Column("context_cut_by_tokens", pa.bool_(), "the context was cut further, by tokens, to fit max_model_len"),
        Column("extract_verbatim", pa.bool_(), "r3a only: the <extract> is verbatim in the document or 'None'"),
    ),
    "qrels": (
        Column("query-id", pa.string(), "sub-question id (subq_id)", False),
        Column("corpus-id", pa.string(), "ClueWeb22-ID (docid)", False),
        Column("score", pa.int32(), "relevance level 0-5", False),
    ),
    # BEIR/MTEB `queries`: mteb's RetrievalDatasetLoader (mteb/abstasks/retrieval_dataset_loaders.py) loads the
    # config "queries" and renames `_id` to `id`; its qrels come from the config "default" or else "qrels".
    "queries": (
        Column("_id", pa.string(), "sub-question id (subq_id), the qrels' query-id", False),
        Column("text", pa.string(), "the sub-question text", False),
    ),
    "corpus_ids": (
        Column("_id", pa.string(), "ClueWeb22-ID (docid), the qrels' corpus-id", False),
        Column("url_hash", pa.string(), "ClueWeb22 URL-hash (= Researchy CluewebURLHash)"),
        Column(
            "url",
            pa.string(),
            "document URL from Researchy's click records (DocStream); null for documents nobody clicked",
        ),
    ),
    # The texts of a release's judged documents, read from the user's own licensed copy (`researchy-subq texts`);
    # written locally, never into a release folder (ClueWeb22's licence forbids redistribution).
    "document_texts": (
        Column("docid", pa.string(), "ClueWeb22-ID (docid), a corpus-ids _id of the release", False),
        Column("url_hash", pa.string(), "ClueWeb22 URL-hash as the copy gives it"),
        Column(
            "text",
            pa.string(),
            "the text as the judge saw it: the first judge.context_words whitespace words of "
            "full_text joined by single spaces",
            False,
        ),
        Column("full_text", pa.string(), "the whole Clean-Text as the copy holds it", False),
        Column("words", pa.int32(), "whitespace-separated words in full_text", False),
    ),
    "missing_documents": (
        Column("docid", pa.string(), "a judged document (corpus-ids _id) the copy does not give", False),
        Column(
            "reason",
            pa.string(),
            "why: no_file (its ClueWeb22 file is not in the copy), no_line (the file is "
            "shorter), other_id (that line holds another ClueWeb22-ID), empty_text, not_in_copy (a Parquet or "
            "JSONL copy lacks it), not_clueweb22_id (the id names no ClueWeb22 file)",
            False,
        ),
    ),
    # The sentence-transformers dataset's sidecar (`researchy-subq training-files`): row i names the ids of the
    # texts in row i of the anchor/positive/negative_1..k dataset. The trainer tokenizes every column it is given
    # (sentence_transformers/base/data_collator.py warns about `*_id` columns), so ids stay out of that dataset.
    "training_ids": (
        Column("query_id", pa.string(), "sub-question id (subq_id) of the anchor", False),
        Column("qid", pa.string(), "question id: siblings share it (keep them out of one batch)", False),
        Column("positive_id", pa.string(), "docid of the positive", False),
        Column("negative_ids", pa.list_(pa.string()), "docids of negative_1..k, in the release's fill order", False),
        Column(
            "negative_sources",
            pa.list_(pa.string()),
            "where each negative comes from: judged, retrieved_unjudged or other_question",
            False,
        ),
    ),
    # TREC Web-track diversity qrels (topic, subtopic, docno, judgment) as ndeval and ir-measures' alpha_nDCG
    # read them: ir-measures takes the subtopic from the qrel's `iteration` field.
    "diversity_qrels": (
        Column("query-id", pa.string(), "question id (qid)", False),
        Column(
            "subtopic", pa.int32(), "1-based position of the sub-question among its question's sub-questions", False
        ),
        Column("corpus-id", pa.string(), "ClueWeb22-ID (docid)", False),
        Column("score", pa.int32(), "relevance level 0-5 of the document for this sub-question", False),
        Column("subq_id", pa.string(), "the sub-question this subtopic is", False),
    ),
    # Tevatron v2's training rows (texttron/tevatron src/tevatron/retriever/dataset.py, TrainDataset.__getitem__,
    # "the new format": query_id, query_text, positive_document_ids, negative_document_ids, the documents looked up
    # by `docid` in a local corpus), ids only; plus qid so a sampler keeps sibling sub-questions apart.
    "hard_negatives": (
        Column("query_id", pa.string(), "sub-question id (subq_id)", False),
        Column("query_text", pa.string(), "the sub-question text", False),
        Column("positive_document_ids", pa.list_(pa.string()), "one docid judged at level >= answer_level", False),
        Column(
            "negative_document_ids",
            pa.list_(pa.string()),
            "k docids filled in training.fill_order, each source's hardest first: judged <= negative_level for the "
            "sub-question, retrieved for the question but never judged, judged <= negative_level for another question",
            False,
        ),
        Column(
            "negative_sources",
            pa.list_(pa.string()),
            "where each of negative_document_ids comes from: judged, retrieved_unjudged or other_question",
            False,
        ),
        Column("qid", pa.string(), "the question: rows of one qid are siblings sharing one judged pool", False),
    ),
    # `researchy-subq pilot`'s sample (generation/pilot/sample.py): the pairs both settings judge.
    "pilot_sample": (
        Column("qid", pa.string(), "a question drawn whole into the sample", False),
        Column("subq_id", pa.string(), "a sub-question of that question", False),
        Column("docid", pa.string(), "a candidate of that question's pool (ClueWeb22-ID)", False),
    ),
    # Per sub-question, every graded judgment, for listwise and distillation losses.
    "graded_lists": (
        Column("query_id", pa.string(), "sub-question id (subq_id)", False),
        Column("qid", pa.string(), "the question", False),
        Column(
            "docids",
            pa.list_(pa.string()),
            "every judged document with a level: level descending, then rerank rank, then BM25 rank (a missing rank "
            "last), then docid, so each level's hardest come first",
            False,
        ),
        Column("labels", pa.list_(pa.int8()), "the level 0-5 of each document in docids", False),
        Column(
            "expected", pa.list_(pa.float32()), "the judge's expected level of each document; null in generate mode"
        ),
        Column(
            "probs",
            pa.list_(pa.list_(pa.float32())),
            "the judge's probability of each level 0..5 per document; null in generate mode",
        ),
    ),
}


def columns(table: str) -> tuple[Column, ...]:
    try:
        return TABLES[table]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(TABLES)}") from None


def arrow_schema(table: str) -> pa.Schema:
    fields = [
        pa.field(c.name, c.type, nullable=c.nullable, metadata={"description": c.description}) for c in columns(table)
    ]
    return pa.schema(fields, metadata={"table": table})


def n_tuple_schema(negatives: int) -> pa.Schema:
    """sentence-transformers' (anchor, positive, negative_1, ..., negative_n) format, texts only: its trainer feeds
    the columns to the loss by position and treats every column but a label/score one as a text input
    (sbert.net docs, Training Overview > Dataset Format; sentence_transformers/base/data_collator.py)."""
    described = [
        ("anchor", "the sub-question text"),
        ("positive", "a document judged >= answer_level, as the judge saw it (or whole)"),
        *(
            (f"negative_{i}", f"negative {i} (1 = the hardest), as the judge saw it (or whole)")
            for i in range(1, negatives + 1)
        ),
    ]
    return pa.schema(
        [pa.field(n, pa.string(), nullable=False, metadata={"description": d}) for n, d in described],
        metadata={"table": "n_tuple"},
    )


def features(table: str):
    """The `datasets.Features` that `load_dataset` reports for a Parquet file of this table."""
    from datasets import Features

    return Features.from_arrow_schema(arrow_schema(table))


def conform(table: pa.Table, name: str) -> pa.Table:
    """A table of an earlier layout of `name`: missing nullable columns are added as nulls, order and
    types set to the schema's. A missing non-nullable column is an error."""
    schema = arrow_schema(name)
    columns = []
    for field in schema:
        if field.name in table.column_names:
            columns.append(table[field.name].cast(field.type))
        elif field.nullable:
            columns.append(pa.nulls(table.num_rows, field.type))
        else:
            raise KeyError(f"{name} table lacks the column {field.name!r}")
    return pa.table(columns, schema=schema)
