"""The questions folder (from `researchy-subq questions`) as topics: question text + its sub-questions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from generation.errors import InputError
from generation.shards import Shard


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
            raise InputError(path, 0, f"not a readable Parquet file ({str(e).splitlines()[0][:100]}); "
                                      "rerun `researchy-subq questions`") from None
    return questions, subquestions


def load_topics(folder: Path, shard: Shard = Shard()) -> list[Topic]:
    """The shard's topics in file order. Holds one shard's questions in memory (about 100k at most)."""
    questions_path, subquestions_path = question_files(folder)
    questions = pq.read_table(questions_path, columns=["qid", "question", "clicked"])
    keep = [shard.owns_key(q) for q in questions["qid"].to_pylist()]
    questions = questions.filter(keep)
    wanted = set(questions["qid"].to_pylist())
    subqs: dict[str, list[str]] = {q: [] for q in wanted}
    table = pq.read_table(subquestions_path, columns=["qid", "text"])
    table = table.filter(pc.is_in(table["qid"], value_set=questions["qid"]))
    for qid, text in zip(table["qid"].to_pylist(), table["text"].to_pylist()):
        subqs[qid].append(text)
    return [Topic(r["qid"], r["question"], tuple(subqs[r["qid"]]), tuple(r["clicked"]))
            for r in questions.to_pylist()]
