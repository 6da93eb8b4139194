"""The card's generated parts: the Data Fields tables (from the schema module's descriptions) and the loading
snippets, written only for the configs a release publishes. Each snippet is a complete Python program, so
tests run every one of them against the built release."""
from __future__ import annotations

import pyarrow as pa

from builder.release.layout import config
from generation.schema import columns


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
    return [{"configs": ", ".join(f"`{n}`" for n in names),
             "rows": [{"name": c.name, "type": type_name(c.type) + ("" if c.nullable else ", never null"),
                       "description": c.description.replace("|", "\\|")} for c in columns(table)]}
            for table, names in tables.items()]


def variable(name: str) -> str:
    return name.replace("-", "_")


def loading_snippets(repo: str, published: list[str], splits: list[str], threshold: int) -> list[dict]:
    """[{"title", "code"}]: every published config, a split slice and streaming, BEIR/MTEB-style dicts with the
    binary threshold, and alpha-nDCG over the diversity qrels."""
    test = "test" if "test" in splits else splits[0]
    has = set(published).__contains__
    snippets = [{"title": "Every config", "code": "\n".join(
        ["from datasets import load_dataset", ""]
        + [f'{variable(n)} = load_dataset("{repo}", "{n}")' for n in published])}]
    snippets.append({"title": "One split, a slice, or streaming", "code": "\n".join([
        "from datasets import load_dataset", "",
        f'first_percent = load_dataset("{repo}", "judgments", split="{splits[0]}[:1%]")',
        f'stream = load_dataset("{repo}", "judgments", split="{splits[0]}", streaming=True)',
        "for row in stream.take(3):",
        '    print(row["subq_id"], row["docid"], row["level"])'])})
    if has("queries") and has("qrels"):
        snippets.append({"title": f"BEIR/MTEB-style dicts, relevant = level >= {threshold}", "code": "\n".join([
            "import pytrec_eval",
            "from datasets import load_dataset", "",
            f'queries = {{q["_id"]: q["text"] for q in load_dataset("{repo}", "queries", split="{test}")}}',
            "qrels = {}",
            f'for r in load_dataset("{repo}", "qrels", split="{test}"):',
            '    qrels.setdefault(r["query-id"], {})[r["corpus-id"]] = r["score"]',
            "# A run scores documents per sub-question; here a stand-in that ranks every judged document alike.",
            "run = {q: {d: 1.0 for d in docs} for q, docs in qrels.items()}",
            "# Graded levels for nDCG; binary metrics count level >= the threshold as relevant.",
            f'graded = pytrec_eval.RelevanceEvaluator(qrels, {{"ndcg_cut_10"}})',
            f'binary = pytrec_eval.RelevanceEvaluator(qrels, {{"P_10", "recall_100"}}, relevance_level={threshold})',
            "print(len(queries), len(graded.evaluate(run)), len(binary.evaluate(run)))"])})
    if has("diversity-qrels") and has("judgments"):
        snippets.append({"title": "alpha-nDCG of a question run (ir-measures + pyndeval)", "code": "\n".join([
            "import ir_measures",
            "from datasets import load_dataset", "",
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
            '    print(ir_measures.calc_aggregate([measure], qrels, run[["query_id", "doc_id", "score"]]))'])})
    return snippets
