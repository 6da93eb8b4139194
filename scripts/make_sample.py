"""Regenerate the bundled sample from scripts/sample_source/topics.yaml.

Writes, deterministically (fixed seed, gzip mtime 0):
  generation/sample/researchy/{train,test}.jsonl      Researchy Questions records, Hub schema
  generation/sample/clueweb22/txt/en/en00/en0000/en0000-NN.json.gz   ClueWeb22 txt records

Usage: python scripts/make_sample.py [--check]   (--check: fail if the committed sample differs)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "scripts" / "sample_source" / "topics.yaml"
SAMPLE = ROOT / "generation" / "sample"
SEED = 20251024
PASSAGES_PER_HEADER = 26
OVERVIEWS_PER_TOPIC = 14
FILLER_PAGES = 260
DOCS_PER_FILE = 600
TEST_EVERY = 5  # every 5th question goes to the test split, as Researchy has train and test
MISSING_CLICK_TOPICS = {2, 7, 11, 15, 18}  # these questions get one clicked page absent from the corpus
LEADS = [
    "",
    "",
    "",
    "According to researchers, ",
    "Experts note that ",
    "In short, ",
    "Reports say that ",
    "It is widely reported that ",
    "Put simply, ",
]
INTRINSIC_KEYS = [
    "ambiguous",
    "incompleteness",
    "assumptive",
    "multi-faceted",
    "knowledge-intensive",
    "subjective",
    "reasoning-intensive",
    "harmful",
]


def url_hash(url: str) -> str:
    """ClueWeb22 and Researchy key a page by the upper-case hex MD5 of its URL."""
    return hashlib.md5(url.encode("utf-8")).hexdigest().upper()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


COMMON_FIRST_WORDS = {
    "a",
    "an",
    "the",
    "when",
    "in",
    "over",
    "many",
    "some",
    "most",
    "during",
    "after",
    "at",
    "as",
    "even",
    "much",
    "more",
    "less",
    "large",
    "studies",
    "rates",
    "people",
    "adults",
    "teens",
    "workers",
    "heat",
    "warmer",
    "coal",
    "lifecycle",
    "spent",
    "emperors",
    "heavy",
    "sublethal",
    "beekeepers",
    "fewer",
    "shop",
    "retail",
    "delivery",
    "banning",
    "traffic",
    "cash",
    "health",
    "retirees",
    "rising",
    "fasting",
    "randomized",
    "common",
    "past",
    "demand",
    "jobs",
    "routine",
    "generative",
    "economists",
    "lenders",
    "banks",
    "foreclosures",
    "investment",
    "credit",
    "sleep",
    "short",
    "teenagers",
    "about",
    "manufacturing",
    "tailpipe",
    "battery",
    "used",
    "lithium",
    "sea",
    "seabirds",
    "abandoned",
    "hundreds",
    "microplastics",
    "plankton",
    "hybrid",
    "junior",
    "video",
    "remote",
    "working",
    "surveys",
    "doctors",
    "opioid",
    "illicitly",
    "synthetic",
    "drug",
    "medications",
    "antibiotics",
    "patients",
    "bacteria",
    "resistant",
    "mutations",
    "infections",
    "pharmaceutical",
    "without",
    "puzzle",
    "gaming",
    "pediatricians",
    "loot",
    "countries",
    "researchers",
    "caffeine",
    "moderate",
    "recent",
    "coffee",
    "pregnant",
    "too",
    "smallholder",
    "farmers",
    "shade",
    "breeding",
    "irregular",
    "severe",
    "lack",
    "infinite",
    "social",
    "edited",
    "internal",
    "cyberbullying",
    "pedestrianized",
    "car-free",
    "congestion",
    "single-family",
    "home",
    "lengthy",
    "cities",
    "low",
    "institutional",
    "homeowners",
    "lumber",
    "labor",
    "land",
    "state",
    "administrative",
    "climbing",
    "easy",
    "outstanding",
    "high",
    "measured",
    "critics",
    "small",
    "fungicides",
    "planting",
    "wild",
    "regional",
    "adjusted",
    "employers",
    "part",
    "our",
    "this",
    "retraining",
    "productivity",
    "subprime",
    "mortgage",
}


def sentence(rng: random.Random, text: str) -> str:
    lead = rng.choice(LEADS)
    if lead and text.split(" ", 1)[0].lower() in COMMON_FIRST_WORDS:
        text = text[0].lower() + text[1:]
    return lead + text


def page(rng, topic, title, sentences, n):
    site = rng.choice(topic["site"])
    url = f"https://www.{site}/{slug(title)}-{n}"
    paragraphs, para = [], []
    for s in sentences:
        para.append(sentence(rng, s))
        if len(para) >= rng.randint(2, 3):
            paragraphs.append(" ".join(para))
            para = []
    if para:
        paragraphs.append(" ".join(para))
    return {"url": url, "title": title, "text": "\n".join([title, *paragraphs])}


def topic_pages(rng, t_index, topic, filler):
    pages = []
    headers = topic["headers"]
    for h_index, header in enumerate(headers):
        others = [s for j, h in enumerate(headers) if j != h_index for s in h["text"]]
        for n in range(PASSAGES_PER_HEADER):
            chosen = rng.sample(header["text"], rng.randint(2, len(header["text"])))
            if rng.random() < 0.5:
                chosen.append(rng.choice(others))
            if rng.random() < 0.3:
                chosen.insert(0, rng.choice(filler))
            title = header["q"].rstrip("?") if n % 3 else topic["question"].capitalize()
            pages.append(page(rng, topic, title, chosen, f"{t_index}{h_index}{n}"))
    every = [s for h in headers for s in h["text"]]
    for n in range(OVERVIEWS_PER_TOPIC):
        chosen = rng.sample(every, rng.randint(4, 7))
        pages.append(page(rng, topic, topic["question"].capitalize() + ": an overview", chosen, f"{t_index}o{n}"))
    return pages


def filler_pages(rng, topics, filler):
    pages = []
    for n in range(FILLER_PAGES):
        chosen = rng.sample(filler, rng.randint(3, 6))
        if rng.random() < 0.15:  # a stray on-topic sentence, as real pages wander
            header = rng.choice(rng.choice(topics)["headers"])
            chosen.append(rng.choice(header["text"]))
        fake_topic = {"site": ["dailyfinds.com", "homeandgarden.net", "travelnotes.org", "shopnow.com"]}
        pages.append(page(rng, fake_topic, chosen[0].split(",")[0].rstrip("."), chosen, f"f{n}"))
    return pages


def researchy_record(rng, qid, topic, topic_pages_, missing_click):
    headers = [[h["q"], *[f" - {b}" for b in h["bullets"]]] for h in topic["headers"]]
    flat = [f"- {line.strip().removeprefix('- ')}" for block in headers for line in block]
    clicked_pages = rng.sample(topic_pages_[: len(topic["headers"]) * PASSAGES_PER_HEADER], 4)
    counts = sorted((rng.randint(1, 80) for _ in clicked_pages), reverse=True)
    if missing_click:
        counts.insert(1, counts[1])
    # Click_Cnt on the Hub is each page's share of the question's clicks ("normalized to be a probability
    # distribution", the dataset card), a float; the id is an integer.
    clicks = [round(c / sum(counts), 4) for c in counts]
    stream = [
        {
            "Url": p["url"],
            "CluewebURLHash": url_hash(p["url"]),
            "UrlLanguage": "en",
            "Title": p["title"],
            "Snippet": p["text"].split("\n", 1)[1][:160],
            "Click_Cnt": c,
        }
        for p, c in zip(clicked_pages, clicks[:1] + clicks[2:] if missing_click else clicks)
    ]
    if missing_click:  # a clicked page outside ClueWeb22-B, as for about half the real clicks
        url = f"https://www.{topic['site'][0]}/archive/{slug(topic['question'])}"
        stream.insert(
            1,
            {
                "Url": url,
                "CluewebURLHash": url_hash(url),
                "UrlLanguage": "en",
                "Title": topic["question"].capitalize(),
                "Snippet": "",
                "Click_Cnt": clicks[1],
            },
        )
    return {
        "id": qid,
        "question": topic["question"],
        "intrinsic_scores": {k: rng.randint(0, 10) for k in INTRINSIC_KEYS},
        "DocStream": stream,
        "gpt4_decomposition": {
            "llm": "gpt-4",
            "type": "decomposition",
            "headers": headers,
            "subquestions": flat,
            "queries": [topic["question"], *[h["q"].rstrip("?").lower() for h in topic["headers"]]],
        },
        "decompositional_score": round(rng.uniform(0.6, 1.0), 4),
        "nonfactoid_score": round(rng.uniform(0.6, 1.0), 4),
    }


def clueweb_lines(pages):
    for i, p in enumerate(pages):
        yield (
            i // DOCS_PER_FILE,
            json.dumps(
                {
                    "URL": p["url"] + "\n",
                    "URL-hash": url_hash(p["url"]),
                    "Language": "en",
                    "ClueWeb22-ID": f"clueweb22-en0000-{i // DOCS_PER_FILE:02d}-{i % DOCS_PER_FILE:05d}",
                    "Clean-Text": p["text"],
                },
                ensure_ascii=False,
            ),
        )


def gzip_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as f:
        f.write(text.encode("utf-8"))
    return buf.getvalue()


def build() -> dict[Path, bytes]:
    source = yaml.safe_load(SOURCE.read_text())
    rng = random.Random(SEED)
    topics, filler = source["topics"], source["filler"]
    pages: list[dict] = []
    records: dict[str, list[dict]] = {"train": [], "test": []}  # split -> its Researchy records
    for t_index, topic in enumerate(topics):
        own = topic_pages(rng, t_index, topic, filler)
        pages.extend(own)
        split = "test" if t_index % TEST_EVERY == TEST_EVERY - 1 else "train"
        qid = 1_000_000 + 7919 * (t_index + 1)  # an integer, as on the Hub
        records[split].append(researchy_record(rng, qid, topic, own, t_index in MISSING_CLICK_TOPICS))
    pages.extend(filler_pages(rng, topics, filler))
    rng.shuffle(pages)
    files: dict[Path, bytes] = {}
    for split, rows in records.items():
        files[SAMPLE / "researchy" / f"{split}.jsonl"] = "".join(json.dumps(r) + "\n" for r in rows).encode()
    by_file: dict[int, list[str]] = {}
    for n, line in clueweb_lines(pages):
        by_file.setdefault(n, []).append(line)
    for n, lines in by_file.items():
        path = SAMPLE / "clueweb22" / "txt" / "en" / "en00" / "en0000" / f"en0000-{n:02d}.json.gz"
        files[path] = gzip_bytes("".join(line + "\n" for line in lines))
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    files = build()
    if args.check:
        stale = [p for p, data in files.items() if not p.exists() or p.read_bytes() != data]
        for p in stale:
            print(f"differs: {p.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale else 0
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"wrote {path.relative_to(ROOT)} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
