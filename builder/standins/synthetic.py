"""Synthetic judgment sets with the paper's Table 1 level mix, for tests and the full-scale benchmark.

Written exactly as the stages write them (question folders and judgment shards with completion
records), vectorised so that 24.3M rows take seconds of Python, not minutes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from generation.profiles.profile import Profile, load_profile
from generation.stages import stage_hash
from generation.stages.pool import admitted_by
from generation.storage.atomic_files import COMPRESSION
from generation.storage.schema import arrow_schema, conform
from generation.storage.shards import Shard, StageOutput

ROW_GROUP_ROWS = 65_536  # the judge stage writes one row group per chunk (4,096 pairs by default)

# Table 1 of the paper (Ju et al., arXiv:2510.21733): counts of levels 0..5 and "Other".
TABLE1 = {0: 3_482_653, 1: 2_651_382, 2: 7_920_642, 3: 2_909_134, 4: 5_444_774, 5: 1_907_722, None: 13}
PAPER_SUBQUESTIONS = 1_288_976
PAPER_JUDGMENTS = 24_316_320


def layout(subquestions: int, judgments: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sub-questions and candidates per question so the totals come out exactly (the last subq is trimmed)."""
    per_question = rng.choice([12, 13, 14, 15, 16, 17], size=subquestions // 14 + 1)
    per_question = per_question[np.cumsum(per_question) <= subquestions]
    if per_question.sum() < subquestions:
        per_question = np.append(per_question, subquestions - per_question.sum())
    mean = judgments / subquestions
    candidates = np.full(len(per_question), int(np.ceil(mean)) + 1)
    return per_question.astype(np.int64), candidates.astype(np.int64)


def judge_columns(level_code: np.ndarray, mode: str, rng: np.random.Generator) -> dict:
    """level, raw, status, probs and expected as a judge of `mode` writes them for these level codes (6 = no
    level). generate: the digit as raw, "I cannot rate this." (no_digit) for no level. distribution: random
    probabilities whose argmax is the level (generation/judging/judges.py `distribution`), raw the digit,
    expected sum p x level; no level = an engine error (distribution mode is never unparsable)."""
    n, none = len(level_code), level_code == 6
    levels = pa.array(np.where(none, 0, level_code).astype(np.int8), mask=none)
    raw = pa.array(["0", "1", "2", "3", "4", "5", "I cannot rate this."]).take(pa.array(level_code))
    columns = {
        "level": levels,
        "raw": raw,
        "status": pa.array(np.where(none, "no_digit", "ok")),
        "probs": pa.nulls(n, pa.list_(pa.float32())),
        "expected": pa.nulls(n, pa.float32()),
    }
    if mode != "distribution":
        return columns
    probs = rng.random((n, 6)).astype(np.float32)
    rows, top = np.arange(n), np.argmax(probs, axis=1)
    target = np.where(none, top, level_code)
    probs[rows, top], probs[rows, target] = probs[rows, target], probs[rows, top]  # the largest at the level
    probs /= probs.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    expected = (probs.astype(np.float64) * np.arange(6)).sum(axis=1).astype(np.float32)
    offsets = pa.array(np.arange(0, 6 * n + 1, 6, dtype=np.int32))
    columns.update(
        raw=pa.array(
            np.where(none, "RuntimeError: synthetic engine failure", np.char.mod("%d", level_code).astype(object))
        ),
        status=pa.array(np.where(none, "engine_error", "ok")),
        probs=pa.ListArray.from_arrays(offsets, pa.array(probs.ravel()), mask=pa.array(none)),
        expected=pa.array(expected, mask=none),
    )
    return columns


def synthesize(
    out: Path,
    subquestions: int = PAPER_SUBQUESTIONS,
    judgments: int = PAPER_JUDGMENTS,
    test_share: float = 0.0,
    shards: int = 4,
    seed: int = 0,
    unparsed_share: float | None = None,
    profile: str | Profile = "paper",
    runs_depth: int = 0,
    runs_pool_only_every: int = 0,
) -> dict:
    """Writes out/questions/{train,test}, out/judgments; returns the folders and the exact level counts.
    The judgment shards' completion records carry `profile`'s config hash, as if judged under it; levels, raw
    and probabilities are written as its judge mode writes them, sources by its pool rule."""
    profile = load_profile(profile) if isinstance(profile, str) else profile
    rng = np.random.default_rng(seed)
    subq_per_q, cand_per_q = layout(subquestions, judgments, rng)
    n_questions = len(subq_per_q)
    qids = np.array([str(1_000_000 + i) for i in range(n_questions)], dtype=object)
    splits = np.where(rng.random(n_questions) < test_share, "test", "train")
    q_of_subq = np.repeat(np.arange(n_questions), subq_per_q)
    k_of_subq = np.arange(len(q_of_subq)) - np.repeat(np.cumsum(subq_per_q) - subq_per_q, subq_per_q)
    subq_ids = pa.array([f"{qids[q]}-{k}" for q, k in zip(q_of_subq, k_of_subq)])
    doc_offsets = np.cumsum(cand_per_q) - cand_per_q
    n_docs = int(cand_per_q.sum())
    docids = pa.array(
        [f"clueweb22-en{i // 1_000_000:04d}-{(i // 10_000) % 100:02d}-{i % 10_000:05d}" for i in range(n_docs)]
    )
    url_hashes = pa.array([hashlib.md5(str(i).encode()).hexdigest().upper() for i in range(n_docs)])

    question_folders: dict[str, Path] = {}
    judgments_folder = out / "judgments"
    for split in sorted(set(splits)):
        mask = splits == split
        folder = out / "questions" / split
        folder.mkdir(parents=True, exist_ok=True)
        clicked = [
            [{"url_hash": url_hashes[int(doc_offsets[q])].as_py(), "url": None, "click_share": 1.0}]
            for q in np.flatnonzero(mask)
        ]
        questions = pa.table(
            {
                "qid": qids[mask].tolist(),
                "question": [f"question {q}" for q in qids[mask]],
                "split": [split] * int(mask.sum()),
                "clicked": clicked,
            }
        )
        pq.write_table(conform(questions, "questions"), folder / "questions.parquet")
        subq_mask = mask[q_of_subq]
        pq.write_table(
            pa.table(
                {
                    "subq_id": subq_ids.filter(pa.array(subq_mask)),
                    "qid": pa.array(qids[q_of_subq[subq_mask]].tolist()),
                    "text": pa.array(["sub-question?"] * int(subq_mask.sum())),
                    "header": pa.nulls(int(subq_mask.sum()), pa.string()),
                    "depth": pa.array(np.full(int(subq_mask.sum()), 2, np.int8)),
                },
                schema=arrow_schema("subquestions"),
            ),
            folder / "subquestions.parquet",
        )
        question_folders[split] = folder

    # Every (sub-question, candidate of its question) pair, trimmed to the exact total.
    subq_of_pair = np.repeat(np.arange(len(q_of_subq)), cand_per_q[q_of_subq])[:judgments]
    rank_in_q = (
        np.arange(len(subq_of_pair))
        - np.repeat(np.cumsum(cand_per_q[q_of_subq]) - cand_per_q[q_of_subq], cand_per_q[q_of_subq])[:judgments]
    )
    question_of_pair = q_of_subq[subq_of_pair]
    doc_of_pair = doc_offsets[question_of_pair] + rank_in_q
    weights = np.array([TABLE1[k] for k in (0, 1, 2, 3, 4, 5, None)], dtype=float)
    if unparsed_share is not None:
        weights[-1] = weights[:-1].sum() * unparsed_share / (1 - unparsed_share)
    level_code = rng.choice(7, size=len(subq_of_pair), p=weights / weights.sum())
    judged = judge_columns(level_code, profile.judge.mode, rng)
    stage = StageOutput(judgments_folder, "judgments", stage_hash(profile, "judgments"))
    judgments_folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, len(subq_of_pair), shards + 1).astype(np.int64)
    for i in range(shards):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        shard = Shard(i, shards)
        with pq.ParquetWriter(stage.path(shard), arrow_schema("judgments"), compression=COMPRESSION) as writer:
            for start in range(lo, hi, 1_000_000):
                stop = min(start + 1_000_000, hi)
                idx = pa.array(doc_of_pair[start:stop])
                rank = rank_in_q[start:stop] + 1
                bm25_rank = pa.array(np.where(rank <= 20, rank, 0).astype(np.int32), mask=rank > 20)
                rerank = (rank * 7) % 23 + 1
                # a candidate past BM25's top 20 was admitted by the reranker's top 20
                rerank_rank = pa.array(np.where((rank > 20) & (rerank > 20), rerank - 20, rerank).astype(np.int32))
                clicked = pa.array(rank == 1)
                writer.write_table(
                    pa.table(
                        {
                            "subq_id": subq_ids.take(pa.array(subq_of_pair[start:stop])),
                            "qid": pa.array(qids, type=pa.string()).take(pa.array(question_of_pair[start:stop])),
                            "docid": docids.take(idx),
                            "url_hash": url_hashes.take(idx),
                            **{name: column[start:stop] for name, column in judged.items()},
                            "bm25_rank": bm25_rank,
                            "rerank_rank": rerank_rank,
                            "clicked": clicked,
                            "source": admitted_by(bm25_rank, rerank_rank, clicked, profile.pool),
                            "context_cut_by_tokens": pa.array(np.zeros(stop - start, dtype=bool)),
                            "extract_verbatim": pa.nulls(stop - start, pa.bool_()),
                        },
                        schema=arrow_schema("judgments"),
                    ),
                    row_group_size=ROW_GROUP_ROWS,
                )
        stage.mark_done(shard, judge="synthetic (Table 1 level mix)")
    counts = {k: int(v) for k, v in zip((0, 1, 2, 3, 4, 5, None), np.bincount(level_code, minlength=7))}
    runs = (
        write_runs(out / "runs", qids, doc_offsets, cand_per_q, n_docs, runs_depth, profile, rng, runs_pool_only_every)
        if runs_depth
        else None
    )
    return {
        "questions": question_folders,
        "judgments": judgments_folder,
        "levels": counts,
        "judgments_total": len(subq_of_pair),
        "subquestions": len(q_of_subq),
        **({"runs": runs} if runs_depth else {}),
    }


def write_runs(
    folder: Path,
    qids: np.ndarray,
    doc_offsets: np.ndarray,
    cand_per_q: np.ndarray,
    n_docs: int,
    depth: int,
    profile: Profile,
    rng: np.random.Generator,
    pool_only_every: int = 0,
) -> Path:
    """`bm25` and `rerank` run shards as the retrieve and rerank stages write them: each question's BM25 run is its
    candidates (ranks 1..n) then `depth - n` documents no pool holds (docids past the pools'), but with
    `pool_only_every` = e every e-th question's runs retrieve its pool only (nothing left unjudged); the reranker's
    run is the same documents in a shuffled order."""
    from generation.stages.rerank import RerankStage
    from generation.stages.retrieve import RetrieveStage

    folder.mkdir(parents=True, exist_ok=True)
    extra = np.maximum(depth - cand_per_q, 0)
    if pool_only_every:
        extra[np.arange(len(qids)) % pool_only_every == 0] = 0
    fresh_start = n_docs + np.r_[0, np.cumsum(extra)[:-1]]
    per_q = np.minimum(cand_per_q, depth) + extra
    question = np.repeat(np.arange(len(qids)), per_q)
    rank = np.arange(len(question)) - np.repeat(np.cumsum(per_q) - per_q, per_q)
    pooled = rank < np.minimum(cand_per_q, depth)[question]
    doc = np.where(pooled, doc_offsets[question] + rank, fresh_start[question] + rank - cand_per_q[question])
    docids = pa.array(
        [f"clueweb22-en{i // 1_000_000:04d}-{(i // 10_000) % 100:02d}-{i % 10_000:05d}" for i in doc.tolist()]
    )
    rerank = np.lexsort((rng.random(len(question)), question))  # a shuffle within each question
    rerank_rank = np.empty(len(question), np.int64)
    rerank_rank[rerank] = rank
    qid_column = pa.array(qids, pa.string()).take(pa.array(question))
    for stage, ranks in ((RetrieveStage, rank), (RerankStage, rerank_rank)):
        output = StageOutput(folder, stage.writes, stage.config_hash(profile))
        table = pa.table(
            {
                "qid": qid_column,
                "docid": docids,
                "rank": pa.array(ranks + 1, pa.int32()),
                "score": pa.array(-(ranks.astype(np.float32))),
                "stage": pa.array(np.full(len(question), stage.writes)),
            },
            schema=arrow_schema("runs"),
        )
        pq.write_table(table, output.path(Shard()), compression=COMPRESSION, row_group_size=ROW_GROUP_ROWS)
        output.mark_done(Shard())
    return folder


def zipf_vocabulary(size: int, rng: np.random.Generator) -> np.ndarray:
    """`size` distinct made-up lower-case words, 2-12 letters, shorter ones first (the frequent words of a Zipf
    vocabulary are the short ones)."""
    letters = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", dtype="S1")
    lengths = np.clip(np.round(2 + np.log2(np.arange(size) + 2) * 0.8 + rng.normal(0, 1, size)), 2, 12).astype(int)
    codes = rng.integers(0, len(letters), lengths.sum())
    flat = letters[codes].tobytes().decode()
    ends = np.cumsum(lengths)
    words = np.array(
        [f"{flat[e - n : e]}{i:x}" if i >= 2000 else flat[e - n : e] for i, (e, n) in enumerate(zip(ends, lengths))],
        dtype=object,
    )  # a hex tail keeps rare words distinct
    return words[np.argsort(lengths, kind="stable")]


def write_clueweb22_txt(
    root: Path, documents: int, per_file: int = 4000, median_words: int = 600, seed: int = 0, vocabulary: int = 200_000
) -> list[Path]:
    """A ClueWeb22 txt tree as the corpus is published, e.g. txt/en/en00/en0000/en0000-00.json.gz, written under
    `root`: one JSON record per document ({"URL" (ending in a newline), "URL-hash" (its MD5, upper-case hex),
    "Language", "ClueWeb22-ID", "Clean-Text"}), each record its own gzip member, and beside each file an .offset file
    of "{:010d}\\n" byte offsets, one per record plus the end (lemurproject/ClueWeb22, ClueWeb22Api.py
    `get_json_record`). Texts have web-like lengths (log-normal words, median `median_words`, lines of ~12 words)
    over a Zipf vocabulary (word rank r drawn with weight 1/r). Returns the .json.gz files."""
    rng = np.random.default_rng(seed)
    vocab = zipf_vocabulary(vocabulary, rng)
    weights = 1.0 / np.arange(1, vocabulary + 1)
    cdf = np.cumsum(weights / weights.sum())
    words = np.clip(rng.lognormal(np.log(median_words), 0.9, documents), 20, 20_000).astype(np.int64)
    files = []
    for start in range(0, documents, per_file):
        f_index = start // per_file
        stream, sub = f"en{f_index // 100:04d}", f_index % 100
        folder = Path(root) / "txt" / "en" / stream[:4] / stream
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stream}-{sub:02d}.json.gz"
        records = (
            clueweb22_record(
                f"https://site{i % 9973}.example.org/page/{i}",
                f"clueweb22-{stream}-{sub:02d}-{i - start:05d}",
                "\n".join(" ".join(tokens[k : k + 12]) for k in range(0, len(tokens), 12)),
            )
            for i in range(start, min(start + per_file, documents))
            for tokens in (vocab[np.searchsorted(cdf, rng.random(words[i]))],)
        )
        write_clueweb22_file(path, records)
        files.append(path)
    return files


def clueweb22_record(url: str, docid: str, text: str, url_hash: str | None = None) -> dict:
    """A ClueWeb22 txt record: "URL" ends in a newline, "URL-hash" is the URL's MD5 in upper-case hex unless given."""
    return {
        "URL": url + "\n",
        "URL-hash": url_hash or hashlib.md5(url.encode()).hexdigest().upper(),
        "Language": "en",
        "ClueWeb22-ID": docid,
        "Clean-Text": text,
    }


def write_clueweb22_file(path: Path, records, offsets: bool = True) -> None:
    """One ClueWeb22 txt file: each record a JSON line in its own gzip member (mtime 0, so the bytes repeat), and with
    `offsets` the .offset file beside it: "{:010d}\\n" byte offsets, one per record plus the end (lemurproject/ClueWeb22,
    ClueWeb22Api.py `get_json_record`)."""
    import gzip
    import json

    starts, position = [], 0
    with open(path, "wb") as out:
        for record in records:
            member = gzip.compress((json.dumps(record, ensure_ascii=False) + "\n").encode(), mtime=0)
            out.write(member)
            starts.append(position)
            position += len(member)
    starts.append(position)
    if offsets:
        path.with_name(path.name.replace(".json.gz", ".offset")).write_text("".join(f"{o:010d}\n" for o in starts))
