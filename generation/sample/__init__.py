"""The bundled sample, written for this project (scripts/make_sample.py regenerates it).

21 questions in the exact Researchy Questions record schema and 2,192 passages in ClueWeb22 txt
record format on the questions' topics, with off-topic pages mixed in. Five questions have one
clicked page that is not in the corpus, as about half the real clicks are outside ClueWeb22-B.
"""

from pathlib import Path

SAMPLE_DIR = Path(__file__).parent
RESEARCHY = {"train": SAMPLE_DIR / "researchy" / "train.jsonl", "test": SAMPLE_DIR / "researchy" / "test.jsonl"}
CLUEWEB22 = SAMPLE_DIR / "clueweb22"
