"""`validate`'s check of each split's TREC qrels file (builder/release/assemble/trec.py writes it): read back with the
kit's one TREC qrels reader (generation/labels/trec_qrels.py), held to iteration 0, the kit's, and compared with the
rows of the split's `qrels` config.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from builder.release.layout import trec_qrels_path
from builder.release.topic_index import MISSING, string_hashes
from builder.release.validate.reading import fingerprint
from generation.labels.trec_qrels import BadLine, read_trec_qrels


def kit_iteration(table: pa.Table, name: str, check) -> pa.Table:
    """The rows whose iteration is the 0 the kit writes; the others are a report line (a TREC reader ignores the
    column, but a file the kit wrote has nothing else there)."""
    good = pc.equal(table["iteration"], "0")
    if pc.all(good).as_py():
        return table
    wrong = pc.filter(table, pc.invert(good))
    row = wrong.slice(0, 1).to_pylist()[0]
    check.fail(
        f"{name} line {row['line']}: the line of query-id {row['query-id']} corpus-id {row['corpus-id']} has "
        f"iteration {row['iteration']!r} and relevance {str(row['score'])!r} (want 0 and an integer)",
        wrong.num_rows,
    )
    return table.filter(good)


def compare_trec_qrels(release: Path, split: str, index, parquet: tuple[int, int], check) -> None:
    """The split's TREC qrels file holds the rows of its `qrels` config: `parquet` is (rows, fingerprint) of
    those rows as `rows.scan_qrels` counts them; the file's lines are counted the same way."""
    path = trec_qrels_path(release, split)
    name = path.relative_to(release)
    if path.is_symlink() or not path.is_file():
        if parquet[0] or path.exists() or path.is_symlink():
            check.fail(
                f"{name}: {'not a regular file' if path.exists() or path.is_symlink() else 'missing'} "
                f"(the qrels config has {parquet[0]:,} {split} rows)"
            )
        return
    rows, printed = 0, 0

    def bad(line: BadLine) -> None:
        check.fail(f"{path.name} line {line.line}: {line.problem}", line.count)

    try:
        for table in read_trec_qrels(path, bad):
            table = kit_iteration(table, path.name, check)
            subquestion = index.subquestion_positions(table["query-id"])
            unknown = subquestion == MISSING
            if unknown.any():
                check.fail(
                    f"{name}: query-id {table['query-id'][int(unknown.argmax())]} is no sub-question",
                    int(unknown.sum()),
                )
            rows += table.num_rows
            printed = (
                printed
                + fingerprint(
                    subquestion, string_hashes(table["corpus-id"]), table["score"].to_numpy(zero_copy_only=False)
                )
            ) % 2**64
    except (OSError, pa.ArrowException) as e:
        check.fail(f"{name}: not readable as a TREC qrels file ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
        return
    if (rows, printed) != parquet:
        check.fail(
            f"{name}: {rows:,} lines that are not the {parquet[0]:,} rows of the qrels config's {split} split"
            + (" (same count, other rows)" if rows == parquet[0] else "")
        )
