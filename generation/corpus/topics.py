"""The questions folder (from `researchy-subq questions`) as topics: question text + its sub-questions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from generation.errors import InputError
from generation.storage.shards import Shard


@dataclass(frozen=True)
class Topic:
    qid: str
    question: str
    subquestions: tuple[str, ...]
    clicked: tuple[dict, ...]


def question_files(folder: Path) -> tuple[Path, Path]:
    folder = Path(folder)
    questions, subquestions = folder / "questions.parquet", folder / "subquestions.parquet"
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; run `researchy-subq questions --out {folder}` first")
    for path in (questions, subquestions):
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing; run `researchy-subq questions --out {folder}` first")
        try:
            pq.read_metadata(path)
        except Exception as e:  # pyarrow: ArrowInvalid or OSError for a cut or foreign file
            raise InputError(
                path,
                0,
                f"not a readable Parquet file ({str(e).splitlines()[0][:100]}); rerun `researchy-subq questions`",
            ) from None
    return questions, subquestions


def read_columns(path: Path, columns: list[str]):
    """The named columns of a questions-folder table, or an InputError naming the file and what it lacks."""
    present = pq.read_schema(path).names
    missing = [c for c in columns if c not in present]
    if missing:
        raise InputError(
            path,
            0,
            f"no column {', '.join(map(repr, missing))} (it has {', '.join(present)}): not a "
            "table from `researchy-subq questions`; rerun it",
        )
    return pq.read_table(path, columns=columns)


def load_topics(folder: Path, shard: Shard = Shard()) -> list[Topic]:
    """The shard's topics in file order. Holds one shard's questions in memory (about 100k at most)."""
    questions_path, subquestions_path = question_files(folder)
    questions = read_columns(questions_path, ["qid", "question", "clicked"])
    keep = [shard.owns_key(q) for q in questions["qid"].to_pylist()]
    questions = questions.filter(keep)
    wanted = set(questions["qid"].to_pylist())
    subqs: dict[str, list[str]] = {q: [] for q in wanted}
    table = read_columns(subquestions_path, ["qid", "text"])
    table = table.filter(pc.is_in(table["qid"], value_set=questions["qid"]))
    for qid, text in zip(table["qid"].to_pylist(), table["text"].to_pylist()):
        subqs[qid].append(text)
    return [Topic(r["qid"], r["question"], tuple(subqs[r["qid"]]), tuple(r["clicked"])) for r in questions.to_pylist()]
