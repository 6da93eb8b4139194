"""bm25.stemmer is honoured at index time (Anserini IndexCollection -stemmer) and at query time (the same
DefaultEnglishAnalyzer on the searcher), on real Lucene indexes."""

import json

import pytest

from generation.profiles.profile import load_profile
from generation.stages.corpus import CorpusStage
from generation.stages.index import IndexBuildError, IndexStage, index_stemmer
from generation.stages.retrieve import open_searcher

# each test indexes its corpus with Anserini
pytestmark = pytest.mark.java

DOCS = {
    "d1": "the runner was running fast",
    "d2": "a quiet run in the park",
    "d3": "two ponies grazing",
    "d4": "we organize a meeting",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("stem-corpus")
    source = root / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS.items()))
    CorpusStage(None, root / "corpus", [source]).run()
    return root / "corpus"


def bm25(stemmer):
    return load_profile("demo").bm25.model_copy(update={"stemmer": stemmer})


# What each analyzer makes of the words (Anserini's AnalyzerUtils.analyze): porter running -> run, ponies and
# pony -> poni, organization and organize -> organ; krovetz running -> running, ponies -> pony, organization
# and organize unchanged; none leaves every word as it is.
@pytest.mark.parametrize(
    "stemmer, hits",
    [
        ("porter", {"running": {"d1", "d2"}, "pony": {"d3"}, "organization": {"d4"}}),
        ("krovetz", {"running": {"d1"}, "pony": {"d3"}, "organization": set()}),
        ("none", {"running": {"d1"}, "pony": set(), "organization": set()}),
    ],
)
def test_query_analysis_matches_the_index(corpus, tmp_path, stemmer, hits):
    index = tmp_path / f"index-{stemmer}"
    IndexStage(None, index, corpus, stemmer=stemmer).run()
    assert index_stemmer(index) == stemmer
    searcher = open_searcher(index, bm25(stemmer))
    assert {query: {h.docid for h in searcher.search(query, k=10)} for query in hits} == hits


def test_an_index_built_with_another_stemmer_is_refused(corpus, tmp_path):
    IndexStage(None, tmp_path / "index", corpus, stemmer="none").run()
    with pytest.raises(IndexBuildError, match="built with stemmer 'none' but the profile's bm25.stemmer is 'porter'"):
        open_searcher(tmp_path / "index", bm25("porter"))
