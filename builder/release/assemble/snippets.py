"""The card's generated parts: the Data Fields tables (from the schema module's descriptions) and the loading
snippets, written only for the configs a release publishes. Each snippet is a complete program (Python, and the
trec_eval commands), so tests run every one of them against the built release."""

from __future__ import annotations

import json
import re

import pyarrow as pa

from builder.release.assemble.training_configs import LIST_ORDER
from builder.release.card_statements import order_text
from builder.release.layout import TREC_QRELS_SUFFIX, config
from builder.release.ranking_documents import ranking_sentence
from generation.storage.schema import columns

MTEB_TITLE = "mteb: a retrieval task over your ClueWeb22 texts"
CARD_SNIPPET = re.compile(r"^### ([^\n]+)\n\n(?:[^`\n][^\n]*\n\n)?```python\n(.*?)\n```", re.MULTILINE | re.DOTALL)


def card_snippets(body: str) -> list[tuple[str, str]]:
    """(title, code) of each Python snippet in a card's body, as a reader copies them."""
    return CARD_SNIPPET.findall(body)


def type_name(t: pa.DataType) -> str:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list of {type_name(t.value_type)}"
    if pa.types.is_struct(t):
        return "struct {" + ", ".join(f"{f.name}: {type_name(f.type)}" for f in t) + "}"
    return {"bool": "bool", "float": "float32", "double": "float64"}.get(str(t), str(t))


def field_tables(published: list[str]) -> list[dict]:
    """One table per schema table, naming the published configs that hold its rows."""
    tables: dict[str, list[str]] = {}
    for name in published:
        tables.setdefault(config(name).table, []).append(name)
    return [
        {
            "configs": ", ".join(f"`{n}`" for n in names),
            "rows": [
                {
                    "name": c.name,
                    "type": type_name(c.type) + ("" if c.nullable else ", never null"),
                    "description": c.description.replace("|", "\\|"),
                }
                for c in columns(table)
            ],
        }
        for table, names in tables.items()
    ]


# The paper's BibTeX, in the card's Citation section and the mteb task's metadata.
PAPER_BIBTEX = """@article{ju2025augmenting,
  title   = {Augmenting Researchy Questions with Sub-question Judgments},
  author  = {Ju, Jia-Huei and Yang, Eugene and Adriaanse, Trevor and Yates, Andrew},
  journal = {arXiv preprint arXiv:2510.21733},
  year    = {2025}
}"""

# What each tool calls the qrels columns: ir-measures wants query_id, doc_id, relevance (its error names them).
QRELS_COLUMNS = {"query-id": "query_id", "corpus-id": "doc_id", "score": "relevance"}


def variable(name: str) -> str:
    return name.replace("-", "_")


def loading_snippets(
    repo: str, published: list[str], splits: list[str], threshold: int, documents: dict[str, int]
) -> list[dict]:
    """[{"title", "code", "note"?, "language"?}]: every published config, a split slice and streaming, ir-measures
    and BEIR-style dicts over `qrels` with the binary threshold, an mteb task, trec_eval on the TREC qrels files
    (builder/release/assemble/trec.py; shell, the one snippet that is not Python), and alpha-nDCG over the diversity qrels.

    The loaders the notes describe, as their code reads: BEIR beir/datasets/data_loader_hf.py (`HFDataLoader`:
    qrels `load_dataset(hf_repo + "-qrels")[split]`, `corpus` and `queries` configs), MTEB 1.x
    mteb/abstasks/AbsTaskRetrieval.py (the same loader, qrels from the same repository's default config), mteb 2.26
    mteb/abstasks/retrieval_dataset_loaders.py (`_load_qrels`: config `default`, else `qrels`)."""
    test = "test" if "test" in splits else splits[0]
    has = set(published).__contains__
    snippets = [
        {
            "title": "Every config",
            "code": "\n".join(
                ["from datasets import load_dataset", ""]
                + [f'{variable(n)} = load_dataset("{repo}", "{n}")' for n in published]
            ),
        }
    ]
    snippets.append(
        {
            "title": "One split, a slice, or streaming",
            "code": "\n".join(
                [
                    "from datasets import load_dataset",
                    "",
                    f'first_percent = load_dataset("{repo}", "judgments", split="{splits[0]}[:1%]")',
                    f'stream = load_dataset("{repo}", "judgments", split="{splits[0]}", streaming=True)',
                    "for row in stream.take(3):",
                    '    print(row["subq_id"], row["docid"], row["level"])',
                ]
            ),
        }
    )
    if has("qrels"):
        snippets.append(
            {
                "title": "ir-measures (trec_eval's measures) on the qrels config",
                "note": ("ir-measures wants the columns `query_id`, `doc_id`, `relevance`: one rename."),
                "code": "\n".join(
                    [
                        "import ir_measures",
                        "from datasets import load_dataset",
                        "from ir_measures import P, R, nDCG",
                        "",
                        f'qrels = load_dataset("{repo}", "qrels", split="{test}").to_pandas().rename(columns={json.dumps(QRELS_COLUMNS)})',
                        "# A run: query_id, doc_id, score for each retrieved document; here a stand-in that ranks every judged "
                        "document alike.",
                        'run = qrels[["query_id", "doc_id"]].assign(score=1.0)',
                        f"print(ir_measures.calc_aggregate([nDCG@10, P(rel={threshold})@10, R(rel={threshold})@100], qrels, run))",
                    ]
                ),
            }
        )
    if has("queries") and has("qrels"):
        snippets.append(
            {
                "title": f"BEIR-style dicts, relevant = level >= {threshold}",
                "note": (
                    "BEIR's `HFDataLoader` and MTEB 1.x read qrels from a repository's default config (`load_dataset(repo)`, "
                    "BEIR from a second repository named `<repo>-qrels`), which here is `judgments`, and texts from a "
                    "`corpus` config, which ClueWeb22's licence keeps out of this dataset. Load `qrels` and `queries` by "
                    "name into the dicts BEIR's loaders return:"
                ),
                "code": "\n".join(
                    [
                        "import pytrec_eval",
                        "from datasets import load_dataset",
                        "",
                        f'queries = {{q["_id"]: q["text"] for q in load_dataset("{repo}", "queries", split="{test}")}}',
                        "qrels = {}",
                        f'for r in load_dataset("{repo}", "qrels", split="{test}"):',
                        '    qrels.setdefault(r["query-id"], {})[r["corpus-id"]] = r["score"]',
                        "# A run scores documents per sub-question; here a stand-in that ranks every judged document alike.",
                        "run = {q: {d: 1.0 for d in docs} for q, docs in qrels.items()}",
                        "# Graded levels for nDCG; binary metrics count level >= the threshold as relevant.",
                        'graded = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"})',
                        f'binary = pytrec_eval.RelevanceEvaluator(qrels, {{"P_10", "recall_100"}}, relevance_level={threshold})',
                        "print(len(queries), len(graded.evaluate(run)), len(binary.evaluate(run)))",
                    ]
                ),
            }
        )
    if has("queries") and has("qrels") and has("corpus-ids"):
        evaluated: list[str] = [s for s in ("dev", "test") if s in splits] or [test]
        snippets.append(
            {
                "title": MTEB_TITLE,
                "note": (
                    "mteb 2 (tested with 2.26) reads this repository's `qrels` config (its `RetrievalDatasetLoader` falls back "
                    "to that name when there is no `default` config) and `queries` as they are, and wants the texts as a "
                    "`corpus` config, which this dataset cannot ship: the task below takes them from the folder "
                    f"`researchy-subq texts` writes from your licensed ClueWeb22-B copy ({ranking_sentence(documents)}, "
                    "as the judge saw them). Its metadata is complete (`TaskMetadata.is_filled()`): the annotations are "
                    "LM-generated, the licence (CDLA-Permissive-2.0, not in mteb's list) is given by its URL. mteb counts "
                    "every score >= 1 as relevant in precision, recall and MRR; load "
                    f"`qrels-binary` instead for level >= {threshold} (nDCG then loses the grades)."
                ),
                "code": "\n".join(
                    [
                        "import mteb",
                        "from datasets import load_dataset",
                        "from mteb.abstasks.retrieval import AbsTaskRetrieval",
                        "from mteb.abstasks.task_metadata import TaskMetadata",
                        "from sentence_transformers import SentenceTransformer",
                        "",
                        f'REPO, SPLITS = "{repo}", {json.dumps(evaluated)}',
                        'TEXTS = "texts/texts-*.parquet"  # researchy-subq texts RELEASE --from YOUR_CLUEWEB22 --out texts',
                        "",
                        "class ResearchySubquestions(AbsTaskRetrieval):",
                        "    metadata = TaskMetadata(",
                        '        name="ResearchySubquestions", dataset={"path": REPO, "revision": "main"}, type="Retrieval",',
                        '        description="Researchy Questions sub-questions over their judged ClueWeb22-B pool, graded 0-5 by '
                        'an LLM judge",',
                        '        reference="https://arxiv.org/abs/2510.21733", category="t2t", modalities=["text"],',
                        '        eval_splits=SPLITS, eval_langs=["eng-Latn"], main_score="ndcg_at_10",',
                        '        date=("2022-01-01", "2025-10-24"),  # ClueWeb22 crawled in 2022; judged for arXiv:2510.21733',
                        '        domains=["Web", "Written"], task_subtypes=["Question answering"],',
                        '        license="https://cdla.dev/permissive-2-0/", annotations_creators="LM-generated", dialect=[],',
                        f'        sample_creation="found", bibtex_citation={PAPER_BIBTEX!r})',
                        "",
                        "    def load_data(self, **kwargs):",
                        '        corpus = load_dataset("parquet", data_files=TEXTS, split="train")',
                        '        corpus = corpus.rename_column("docid", "id").select_columns(["id", "text"])',
                        '        self.dataset = {"default": {}}',
                        "        for split in SPLITS:",
                        "            qrels = {}",
                        '            for r in load_dataset(REPO, "qrels", split=split):',
                        '                qrels.setdefault(r["query-id"], {})[r["corpus-id"]] = r["score"]',
                        '            queries = load_dataset(REPO, "queries", split=split).rename_column("_id", "id")',
                        '            queries = queries.filter(lambda q: q["id"] in qrels)',
                        '            self.dataset["default"][split] = {"corpus": corpus, "queries": queries, "relevant_docs": qrels,',
                        '                                              "top_ranked": None}',
                        "        self.data_loaded = True",
                        "",
                        "assert ResearchySubquestions.metadata.is_filled()",
                        'model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")',
                        "# cache=None: mteb caches results by model name, and names every local model no_model_name/available",
                        "results = mteb.evaluate(model, ResearchySubquestions(), cache=None)",
                        "for split in SPLITS:",
                        '    print(split, "nDCG@10", results.task_results[0].get_score(splits=[split]))',
                    ]
                ),
            }
        )
    if has("qrels"):
        # trec_eval's `-l<num>` is "the minimum relevance judgement value needed for a document to be called
        # relevant" (trec_eval's help): its binary measures' threshold.
        path = f"data/qrels/{test}{TREC_QRELS_SUFFIX}"
        snippets.append(
            {
                "title": "TREC qrels files (trec_eval)",
                "language": "bash",
                "note": (
                    f"Each split's `qrels` are also a TREC qrels file beside its Parquet files, `data/qrels/SPLIT"
                    f"{TREC_QRELS_SUFFIX}`: one judgment a line, `query-id 0 corpus-id level`, the same rows as the `qrels` "
                    "config. trec_eval scores a TREC run whose query ids are sub-question ids (`subq_id`) against it as it "
                    "is; Pyserini's `python -m pyserini.eval.trec_eval` takes the same arguments, and ir-measures reads the "
                    f'file with `ir_measures.read_trec_qrels("{path}")`.'
                ),
                "code": "\n".join(
                    [
                        f"hf download {repo} {path} --repo-type dataset --local-dir .",
                        f"trec_eval -m ndcg_cut.10 {path} run.txt  # graded: the levels as gains",
                        f"trec_eval -l{threshold} -m P.10 -m recall.100 {path} run.txt  # binary: relevant = level >= {threshold}",
                    ]
                ),
            }
        )
    if has("diversity-qrels") and has("judgments"):
        snippets.append(
            {
                "title": "alpha-nDCG of a question run (ir-measures + pyndeval)",
                "code": "\n".join(
                    [
                        "import ir_measures",
                        "from datasets import load_dataset",
                        "",
                        f'div = load_dataset("{repo}", "diversity-qrels", split="{test}").to_pandas()',
                        'qrels = div.rename(columns={"query-id": "query_id", "corpus-id": "doc_id", "score": "relevance"})',
                        'qrels["iteration"] = qrels["subtopic"].astype(str)  # ir-measures reads the subtopic from `iteration`',
                        "# A question run: here the reranker's order of each question's candidates.",
                        f'pool = load_dataset("{repo}", "judgments", split="{test}").select_columns(["qid", "docid", "rerank_rank"])',
                        'run = pool.to_pandas().dropna().drop_duplicates(["qid", "docid"])',
                        'run = run.rename(columns={"qid": "query_id", "docid": "doc_id"}).assign(score=-run["rerank_rank"])',
                        'qrels = qrels[["query_id", "iteration", "doc_id", "relevance"]]',
                        "# One measure per call: ir-measures 0.4.3 hands pyndeval's second threshold an exhausted run.",
                        f"for measure in (ir_measures.alpha_nDCG(rel={threshold}) @ 10, ir_measures.alpha_nDCG(rel=1) @ 10):",
                        '    print(ir_measures.calc_aggregate([measure], qrels, run[["query_id", "doc_id", "score"]]))',
                    ]
                ),
            }
        )
    return snippets + training_snippets(repo, has, splits)


def training_snippets(repo: str, has, splits: list[str]) -> list[dict]:
    """`hard-negatives` as sentence-transformers' n-tuples (`mine_hard_negatives`' "n-tuple" output: anchor,
    positive, negative_1..n; sentence_transformers/util/hard_negatives.py) and `graded-lists` as its "labeled-list"
    (query, [docs], [labels]) for listwise CrossEncoder losses, both over the user's own texts."""
    train = "train" if "train" in splits else splits[0]
    snippets = []
    if has("hard-negatives"):
        snippets.append(
            {
                "title": "Hard negatives: Tevatron v2 rows, sentence-transformers n-tuples",
                "note": (
                    "Tevatron v2's training format as it is (`query_id`, `query_text`, "
                    "`positive_document_ids`, `negative_document_ids`; the documents by `docid` from your own corpus). "
                    "sentence-transformers' (anchor, positive, negative_1..k) comes from it with your texts, as below or "
                    "by the kit's texts command. Rows of one `qid` are siblings judged over one pool: keep them out of "
                    "each other's in-batch negatives."
                ),
                "code": "\n".join(
                    [
                        "from datasets import load_dataset",
                        "",
                        f'rows = load_dataset("{repo}", "hard-negatives", split="{train}")',
                        "texts = {}  # docid -> text, from your licensed ClueWeb22 copy",
                        "",
                        "def has_texts(row):",
                        '    return all(d in texts for d in row["positive_document_ids"] + row["negative_document_ids"])',
                        "",
                        "def n_tuple(row):",
                        '    tuple_ = {"anchor": row["query_text"], "positive": texts[row["positive_document_ids"][0]]}',
                        '    for i, docid in enumerate(row["negative_document_ids"], 1):',
                        '        tuple_[f"negative_{i}"] = texts[docid]',
                        "    return tuple_",
                        "",
                        "kept = rows.filter(has_texts)",
                        'print(f"{len(rows) - len(kept):,} of {len(rows):,} rows left out: a document without a text in your copy")',
                        "train = kept.map(n_tuple, remove_columns=rows.column_names)",
                        "print(train.column_names, len(train))",
                    ]
                ),
            }
        )
    if has("graded-lists") and has("queries"):
        snippets.append(
            {
                "title": "Graded lists: listwise and distillation losses",
                "note": (
                    f"One row per sub-question: every graded document ({order_text(LIST_ORDER)}), with the judge's "
                    "`expected` level and `probs` where it ran in distribution mode (null otherwise). As sentence-transformers' "
                    "`labeled-list` (query, [docs], [labels]) for a CrossEncoder `LambdaLoss` or `ListNetLoss`:"
                ),
                "code": "\n".join(
                    [
                        "from datasets import load_dataset",
                        "",
                        f'lists = load_dataset("{repo}", "graded-lists", split="{train}")',
                        f'queries = {{q["_id"]: q["text"] for q in load_dataset("{repo}", "queries", split="{train}")}}',
                        "texts = {}  # docid -> text, from your licensed ClueWeb22 copy",
                        "",
                        "def labeled_list(row):  # a document without a text in your copy is left out of its list",
                        '    kept = [(texts[d], level) for d, level in zip(row["docids"], row["labels"]) if d in texts]',
                        '    return {"query": queries[row["query_id"]], "docs": [t for t, _ in kept], "labels": [v for _, v in kept]}',
                        "",
                        'documents = [d for docids in lists["docids"] for d in docids]',
                        "missing = sum(d not in texts for d in documents)",
                        'print(f"{missing:,} of {len(documents):,} documents left out of their lists: no text in your copy")',
                        "train = lists.map(labeled_list, remove_columns=lists.column_names)",
                        'train = train.select_columns(["query", "docs", "labels"])  # the column order the losses read',
                        "print(train.column_names, len(train))",
                    ]
                ),
            }
        )
    return snippets
