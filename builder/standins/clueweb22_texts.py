"""A synthetic ClueWeb22 txt tree and the stub of a release over it, for `researchy-subq texts` in
tests/builder/training/test_texts.py and scripts/bench_texts.py.

The tree has ClueWeb22's published shape (lemurproject/ClueWeb22, ClueWeb22Api.py): txt/en/en00/en0000/en0000-NN.json.gz,
one record per line, each record its own gzip member, and `en0000-NN.offset` with one '{:010d}\\n' offset per
record plus a closing one. Small on purpose; builder/standins/synthetic.py's `write_clueweb22_txt` writes the large
trees of the benchmarks, and both write their files with its `write_clueweb22_file`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from builder.standins.synthetic import clueweb22_record, write_clueweb22_file

WORDS = (
    "the of and to in is that for on with as by at from this are be or an it was which have can not more "
    "evidence energy policy history health market climate cells water rome empire sleep memory"
).split()


def page(rng: random.Random, words: int) -> str:
    lines = [" ".join(rng.choices(WORDS, k=12)) for _ in range(max(1, words // 12))]
    return "\n".join(lines)


def write_tree(
    root: Path,
    records: dict[str, int],
    words: int = 300,
    seed: int = 0,
    offsets: bool = True,
    skip: frozenset[str] = frozenset(),
) -> None:
    """ClueWeb22 txt files `{key}.json.gz` (key e.g. en0000-01) of `records[key]` records each, one gzip member a
    record; with `offsets`, the `.offset` file beside each. Records whose docid is in `skip` hold an empty text."""
    rng = random.Random(seed)
    for key, count in records.items():
        lang_dir = key.split("-")[0]
        folder = Path(root) / "txt" / lang_dir[:2] / lang_dir[:4] / lang_dir
        folder.mkdir(parents=True, exist_ok=True)
        docids = [f"clueweb22-{key}-{i:05d}" for i in range(count)]
        write_clueweb22_file(
            folder / f"{key}.json.gz",
            (
                clueweb22_record(
                    f"https://example.org/{key}/{i}",
                    docid,
                    "" if docid in skip else page(rng, words),
                    url_hash=f"{random.Random(docid).getrandbits(128):032X}",
                )
                for i, docid in enumerate(docids)
            ),
            offsets=offsets,
        )


def write_release_stub(folder: Path, docids: list[str], context_words: int = 2048) -> Path:
    """The two things `texts` reads of a release: manifest.json (its profile) and the corpus-ids config."""
    from generation.profiles.profile import load_profile

    profile = load_profile("paper")
    profile = profile.model_copy(update={"judge": profile.judge.model_copy(update={"context_words": context_words})})
    ids = Path(folder) / "data" / "corpus_ids"
    ids.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {"_id": docids, "url_hash": [None] * len(docids), "url": [None] * len(docids)},
            schema=pa.schema([("_id", pa.string()), ("url_hash", pa.string()), ("url", pa.string())]),
        ),
        ids / "train-00000-of-00001.parquet",
    )
    from builder.release.assemble.hard_negatives import NegativeCounts
    from builder.release.contract import Manifest, Models
    from builder.release.training_record import settings_record
    from generation import __version__

    stub = Manifest(  # through the contract, with nothing but the profile and the split filled in
        repo="ORG/stub-release",
        code_version=__version__,
        profile=profile,
        profile_hash=profile.config_hash(),
        models=Models(reranker=None, judge=profile.judge.model),
        prompt=None,
        rows={},
        stats={},
        splits=["train"],
        files={},
        training=settings_record(profile, NegativeCounts(), "none"),  # no configs derived: no runs read
        shards_revision=None,
    )
    (Path(folder) / "manifest.json").write_text(json.dumps(stub.as_json(), default=str))
    return Path(folder)
