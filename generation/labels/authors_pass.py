"""The authors' clicked-document pass, reconstructed to find the ratings it graded on another document's text.

DylanJoo/crux, `crux/augmentation/gen_ratings_offload_qrel.py` lines 82-91 (at dabfb0ac48ed41dbac9a80d4cbcb75c32db44405,
the repository's newest commit; the file last changed in 97fee4e358accad28492dc0d2f7ce47879cd501b and no later commit
touches it, so the defect is in every version):

    doc_id_list = [docid for docid in qrel[id] if (docid not in ratings_done[id] and docid not in run[id])]
    doc_text_list = []
    for docid in doc_id_list:
        try:
            doc_text_list.append(corpus[docid])
        except:
            print(f"Document {docid} not found in corpus for id {id}. Skipping.")

    output_array = []
    for docid, doc in zip(doc_id_list, doc_text_list):
        # one request per sub-question j: {"id": f"{id}::{docid}::{j}", ...} with context doc['text']

`qrel[id]` is the question's DocStream URL-hashes in their order (`crux/tools/researchy/ir_utils.py` `get_qrel`: a dict,
so a repeated hash keeps its first place); `run[id]` the top 10 of their BM25 + Qwen3 run. A clicked document missing
from the corpus is skipped in the text list only, so from it on each requested id is zipped with the next present
document's text, and the list's last ids are never requested. Their log `crux-researchy/slurm/missing` lists about
33,000 missing clicked documents over about 12,900 questions.

The requested id that is not the sent text's id does not depend on `run[id]`: a document of the run is left out of
both lists alike. Without their run, a clicked document that was in it (so not in this pass: its rating is the first
pass's, on its own text) is flagged when a missing document comes before it. "Missing" is judged by the corpus the
import is given, so the flags are as exact as that corpus is close to theirs (`cw22-b-researchy-v1`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable


def clicked_pass(
    clicked: Iterable[str], in_corpus: Container[str], excluded: Container[str] = ()
) -> list[tuple[str, str]]:
    """(the document id a request carried, the id of the document whose text it sent), in the loop's order."""
    requested = [docid for docid in dict.fromkeys(clicked) if docid not in excluded]
    texts = [docid for docid in requested if docid in in_corpus]
    return list(zip(requested, texts))


def graded_on_other_text(
    clicked: Iterable[str], in_corpus: Container[str], excluded: Container[str] = ()
) -> dict[str, str]:
    """For each document id the pass requested with another document's text: the id of that text."""
    return {asked: sent for asked, sent in clicked_pass(clicked, in_corpus, excluded) if asked != sent}
