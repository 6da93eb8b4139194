"""The judge prompt registry: exact texts, a stable hash each, scale, parser and token budget.

- crux-paper: Figure 2 of the paper (Ju et al., arXiv:2510.21733), verbatim.
- crux-paper-document-first: Figure 2's lines, verbatim, with the "Context:" line moved before the "Question:"
              line. Not the paper's prompt: its labels can differ. The document then opens the prompt, so one
              document's prefix serves every sub-question of its question (generation/backends/prefix_groups.py).
- crux-code:  the template of the authors' released code, character for character
              (DylanJoo/crux crux/augmentation/gen_ratings.py lines 24-39; the same text in
              gen_ratings_offload.py and gen_ratings_offload_qrel.py), not Figure 2 edited.
- umbrela:    the UMBRELA prompt as R3A (Yuan et al., arXiv:2508.02506) prints it in Appendix D (0-2).
- r3a:        R3A's Appendix C, two rounds: infer the intent from the question's top-ranked candidates
              (auxiliary documents), then grade 0/1/2 with a verbatim <extract>.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from generation.judging.parsing import parse_first_digit, parse_r3a, parse_umbrela

CRUX_GUIDELINE = [
    "- 5: The context is highly relevant, complete, and accurate.",
    "- 4: The context is mostly relevant and complete but may have minor gaps or inaccuracies.",
    "- 3: The context is partially relevant and complete, with noticeable gaps or inaccuracies.",
    "- 2: The context has limited relevance and completeness, with significant gaps or inaccuracies.",
    "- 1: The context is minimally relevant or complete, with substantial shortcomings.",
    "- 0: The context is not relevant or complete at all.",
]
CRUX_INSTRUCTION = (
    "Instruction: Determine whether the question can be answered based on the provided context? "
    "Rate the context with on a scale from 0 to 5 according to the guideline below. "
    "Do not write anything except the rating."
)


def _crux(guideline: list[str], ending: str, document_first: bool = False) -> str:
    question, context = "Question: {question}", "Context: {context}"
    first, second = (context, question) if document_first else (question, context)
    return "\n".join([CRUX_INSTRUCTION, "", "Guideline:", *guideline, "", first, "", second, "", ending])


CRUX_PAPER = _crux(CRUX_GUIDELINE, "Rating:")
CRUX_PAPER_DOCUMENT_FIRST = _crux(CRUX_GUIDELINE, "Rating:", document_first=True)
# DylanJoo/crux crux/augmentation/gen_ratings.py lines 24-39 (`prompt_template`), as the code has it: a new line
# after "Instruction:", "context." with a full stop, "Rate the context on a scale" (no "with"), "Guideline: " with
# its trailing space, guideline lines 5..1 ending " to the question", one new line between question and context,
# a space after the context, and "Rating: " with its trailing space.
CRUX_CODE = (
    "Instruction:\n"
    "Determine whether the question can be answered based on the provided context. Rate the context on a scale "
    "from 0 to 5 according to the guideline below. Do not write anything except the rating.\n"
    "\n"
    "Guideline: \n"
    "- 5: The context is highly relevant, complete, and accurate to the question.\n"
    "- 4: The context is mostly relevant and complete but may have minor gaps or inaccuracies to the question.\n"
    "- 3: The context is partially relevant and complete, with noticeable gaps or inaccuracies to the question.\n"
    "- 2: The context has limited relevance and completeness, with significant gaps or inaccuracies to the "
    "question.\n"
    "- 1: The context is minimally relevant or complete, with substantial shortcomings to the question.\n"
    "- 0: The context is not relevant or complete at all.\n"
    "\n"
    "Question: {question}\n"
    "Context: {context} \n"
    "\n"
    "Rating: "
)

UMBRELA_SYSTEM = "You are a relevance assessor working on a usergenerated content platform."
UMBRELA_USER = """Given a query and a document, you must provide a score on an integer scale of 0 to 2 with the following meanings:

0 = represent that the document has nothing to do with the query

1 = represents that the document has some answer for the query, but the answer may be a bit unclear, or hidden amongst extraneous information

2 = represents that the document is dedicated to the query and contains the exact answer

Important Instruction:

Assign category 1 if document presents something very important related to the entire topic but also has some extra information and category 2 if the document only and entirely refers to the topic. If none of the above satisfies give it category 0.

Please determine the primary intent behind a user's search query, using both your internal knowledge and the provided context.

Your response must strictly follow the format:
<think> [the reasoning content] </think>
<score> [0/1/2] </score>
Input
[query]: {question}

[document to be evaluated]: {context}"""

R3A_SYSTEM = "You are a content understanding engineer working on a user-generated content platform."
R3A_ROUND1 = """Please determine the primary intent behind a user's search query, using both your internal knowledge and the provided context.

Your input consists of the [query] and the [inplatform documents] retrieved based on that query. The latter is intended to assist in judging the user's intent but may contain irrelevant content. The search query should be considered the primary reference. Please carefully analyze the given [query] and the corresponding [in-platform documents] to infer the underlying query intent.

Your response must strictly follow the format: <think> [the reasoning content] </think> <intent> [inferred user intent] </intent> Input

[query]: {question}

[in-platform documents]: {documents}"""
R3A_ROUND2 = """Please assess the relevance of the [document to be evaluated] based on the user's input [query] and the inferred [intent], and extract the relevant fragment of the document accordingly.

Scoring Criteria

0 =not relevant, the document has nothing to do with the query.

1 = partially relevant, the document is relevant to the query but partly answers it.

2 = highly relevant, the document is dedicated to the query and contains the exact answer.

Extraction Guidelines

- 1. Extract the content from the [document to be evaluated] that is strictly relevant to the query and can help answer the query. This may include paragraphs, sentences, or even individual phrases.
- 2. The extracted content must come directly from the original document, with all punctuation preserved.

Your response must strictly follow the format: <think> [the reasoning content] </think> <extract> [fragment/none] </extract> <score> [0/1/2] </score>

Input

[document to be evaluated]: {context}"""


AUTHORS_BULLET = re.compile(r"(\s)*-\s")


def authors_subquestion(text: str) -> str:
    """The sub-question text the authors' code used: crux/tools/researchy/ir_utils.py line 35 applies
    remove_header (crux/tools/researchy/text_utils.py lines 8-10), which deletes EVERY dash followed by white
    space, with the white space before it, not only the leading bullet: "the pros - and cons" -> "the prosand
    cons". Applied to our text (the leading "- " already removed) it gives theirs."""
    return AUTHORS_BULLET.sub("", text).strip()


@dataclass(frozen=True)
class Prompt:
    id: str
    source: str
    user: str
    max_level: int
    parser: Callable[[str], object]
    max_new_tokens: int  # the token budget of one answer
    system: str | None = None
    rounds: tuple[str, ...] = field(default=())  # extra user turns before `user` (r3a's intent round)
    grade_first: bool = True  # the answer's first token is the grade (what distribution mode reads)
    question_text: Callable[[str], str] | None = None  # how the sub-question text enters the prompt

    @property
    def document_first(self) -> bool:
        """The document comes before anything of the sub-question: prompts of one document with different
        sub-questions share every token up to the question (the template's head, the instruction, the document)."""
        context, question = self.user.find("{context}"), self.user.find("{question}")
        return not self.rounds and 0 <= context < question

    @property
    def levels(self) -> list[int]:
        return list(range(self.max_level + 1))

    @property
    def sha256(self) -> str:
        fields = {"system": self.system, "rounds": self.rounds, "user": self.user}
        if self.question_text is not None:
            fields["question_text"] = self.question_text.__name__
        payload = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def render(self, question: str, context: str) -> str:
        if self.question_text is not None:
            question = self.question_text(question)
        return self.user.format(question=question, context=context)

    def parse(self, text: str):
        """The answer's level and status by this prompt's parser (the first-digit rule kept on this prompt's scale)."""
        if self.parser is parse_first_digit:
            return parse_first_digit(text, self.max_level)
        return self.parser(text)

    def messages(self, question: str, context: str, history: list[dict] | None = None) -> list[dict]:
        """Chat messages: the system turn when there is one, earlier rounds, then this prompt."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, *(history or []), {"role": "user", "content": self.render(question, context)}]


REGISTRY: dict[str, Prompt] = {
    "crux-paper": Prompt("crux-paper", "Ju et al., arXiv:2510.21733, Figure 2", CRUX_PAPER, 5, parse_first_digit, 3),
    "crux-paper-document-first": Prompt(
        "crux-paper-document-first",
        "Ju et al., arXiv:2510.21733, Figure 2, with its Context line moved before its Question line "
        "(document first: not the paper's order; every line otherwise verbatim)",
        CRUX_PAPER_DOCUMENT_FIRST,
        5,
        parse_first_digit,
        3,
    ),
    "crux-code": Prompt(
        "crux-code",
        "the authors' released code, crux/augmentation/gen_ratings.py",
        CRUX_CODE,
        5,
        parse_first_digit,
        3,
        question_text=authors_subquestion,
    ),
    # both answer "<think> ..." before their score
    "umbrela": Prompt(
        "umbrela",
        "Yuan et al. (R3A), arXiv:2508.02506, Appendix D",
        UMBRELA_USER,
        2,
        parse_umbrela,
        1024,
        UMBRELA_SYSTEM,
        grade_first=False,
    ),
    "r3a": Prompt(
        "r3a",
        "Yuan et al. (R3A), arXiv:2508.02506, Appendix C",
        R3A_ROUND2,
        2,
        parse_r3a,
        1024,
        R3A_SYSTEM,
        (R3A_ROUND1,),
        grade_first=False,
    ),
}


# Each prompt's document-first variant (the same lines, the context moved before the question).
DOCUMENT_FIRST_VARIANTS = {"crux-paper": "crux-paper-document-first"}


def question_and_document_first(prompt_id: str) -> tuple[str, str | None]:
    """(the prompt with the question first, its document-first variant or None) for a prompt id of either."""
    faithful = next((f for f, v in DOCUMENT_FIRST_VARIANTS.items() if v == prompt_id), prompt_id)
    return faithful, DOCUMENT_FIRST_VARIANTS.get(faithful)


def get_prompt(prompt_id: str) -> Prompt:
    try:
        return REGISTRY[prompt_id]
    except KeyError:
        raise KeyError(f"unknown prompt {prompt_id!r}; known: {', '.join(REGISTRY)}") from None


def r3a_intent_turn(question: str, documents: list[str]) -> str:
    """Round one of r3a: the question and its top-ranked candidates as auxiliary documents."""
    listed = "\n".join(f"[{i}] {d}" for i, d in enumerate(documents, 1))
    return R3A_ROUND1.format(question=question, documents=listed)
