import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from generation.sample import CLUEWEB22, RESEARCHY

ROOT = Path(__file__).resolve().parents[3]


def clueweb_records():
    for path in sorted(CLUEWEB22.glob("txt/en/en00/en0000/en0000-*.json.gz")):
        with gzip.open(path, "rt") as f:
            yield from (json.loads(line) for line in f)


def test_corpus_is_clueweb22_txt_records():
    records = list(clueweb_records())
    assert len(records) >= 2000
    assert all(set(r) == {"ClueWeb22-ID", "URL", "URL-hash", "Language", "Clean-Text"} for r in records)
    assert len({r["ClueWeb22-ID"] for r in records}) == len(records)
    assert all(r["ClueWeb22-ID"].startswith("clueweb22-en0000-") and len(r["URL-hash"]) == 32 for r in records)


def test_questions_are_researchy_records_with_mostly_present_clicks():
    hashes = {r["URL-hash"] for r in clueweb_records()}
    records = [json.loads(line) for path in RESEARCHY.values() for line in path.read_text().splitlines()]
    assert 18 <= len(records) <= 25
    clicked = [d["CluewebURLHash"] for r in records for d in r["DocStream"]]
    missing = [h for h in clicked if h not in hashes]
    assert 0 < len(missing) < len(clicked) / 5, "most clicked documents are in the corpus, a few are not"
    for r in records:
        assert all(
            isinstance(block, list) and block[1].startswith(" - ") for block in r["gpt4_decomposition"]["headers"]
        )
        assert all(s.startswith("- ") for s in r["gpt4_decomposition"]["subquestions"])
        assert len(r["intrinsic_scores"]) == 8


@pytest.mark.subprocess
def test_sample_is_regenerated_byte_for_byte():
    result = subprocess.run(
        [sys.executable, "scripts/make_sample.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
