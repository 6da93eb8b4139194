"""Graded labels from anywhere the kit meets them, as one (query, docid, grade) table: judgment shards,
a release folder, or TREC qrels files (`qid iteration docid grade`, read by generation/labels/trec_qrels.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from generation.errors import InputError
from generation.labels import trec_qrels
from generation.storage.shards import stage_files

LABEL_SCHEMA = pa.schema([("query", pa.string()), ("docid", pa.string()), ("grade", pa.int32())])


def read_trec_qrels(path: Path) -> pa.Table:
    """A TREC qrels file's labels (generation/labels/trec_qrels.py's rules); the first bad line raises, naming it."""

    def bad(line: trec_qrels.BadLine) -> None:
        raise InputError(path, line.line, line.problem, field="grade" if line.field == "rel" else None)

    tables = [
        pa.table(
            {"query": t["query-id"], "docid": t["corpus-id"], "grade": pc.cast(t["score"], pa.int32())},
            schema=LABEL_SCHEMA,
        )
        for t in trec_qrels.read_trec_qrels(Path(path), bad)
    ]
    return pa.concat_tables(tables) if tables else LABEL_SCHEMA.empty_table()


def read_trec_run(path: Path) -> dict[str, list[str]]:
    """A TREC run -> qid -> docids in trec_eval's order (builder.analysis.evaluate.read_run), refusing what that reader
    leaves out with a warning: a malformed line, or a document listed twice for one query (a ranking cannot
    hold it twice). The error names the file and the first such line."""
    import warnings

    from builder.analysis.evaluate import read_run

    path = Path(path)
    if not path.is_file():
        raise InputError(path, 0, "no such run file" if not path.exists() else "not a file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = read_run(path)
    except UnicodeDecodeError as e:
        raise InputError(path, 0, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    if run.malformed:
        raise InputError(
            path,
            run.malformed[0],
            f"expected 'qid Q0 docid rank score tag', the score a number ({len(run.malformed):,} such lines)",
        )
    if run.duplicates:
        raise InputError(
            path,
            run.duplicates[0],
            f"a document listed twice for one query ({len(run.duplicates):,} such lines)",
            field="docid",
        )
    return run.ranked


def judgment_paths(path: Path) -> list[Path]:
    if (path / "data" / "judgments").is_dir():  # a release folder
        return sorted((path / "data" / "judgments").glob("*/*.parquet"))
    return stage_files(path, "judgments")


def read_labels(path: str | Path) -> pa.Table:
    """Unparsed judgments (level null) have no grade and are left out, as they are of qrels."""
    path = Path(path)
    if path.is_file():
        return read_trec_qrels(path)
    if path.is_dir() and any(path.glob("*.qrels")) and not (path / "data").exists():
        return pa.concat_tables([read_trec_qrels(p) for p in sorted(path.glob("*.qrels"))])
    table = ds.dataset(judgment_paths(path), format="parquet").to_table(columns=["subq_id", "docid", "level"])
    table = table.filter(pc.is_valid(table["level"]))
    return pa.table(
        {"query": table["subq_id"], "docid": table["docid"], "grade": pc.cast(table["level"], pa.int32())},
        schema=LABEL_SCHEMA,
    )


def parse_mapping(text: str | None) -> dict[int, int] | None:
    """ "0:0,1:0,2:1,3:2,4:3,5:3" -> {0: 0, 1: 0, ...}; None keeps grades as they are."""
    if not text:
        return None
    mapping = {}
    for item in text.split(","):
        source, _, target = item.partition(":")
        try:
            mapping[int(source)] = int(target)
        except ValueError:
            raise ValueError(f"scale mapping {text!r}: expected 'grade:grade,...', got {item!r}") from None
    return mapping


def apply_mapping(grades: pa.Array, mapping: dict[int, int] | None, binary_at: int | None) -> pa.Array:
    values = grades.to_pylist()
    if mapping is not None:
        missing = sorted({g for g in values if g not in mapping})
        if missing:
            raise ValueError(f"scale mapping has no target for grades {missing}")
        values = [mapping[g] for g in values]
    if binary_at is not None:
        values = [int(g >= binary_at) for g in values]
    return pa.array(values, pa.int32())
