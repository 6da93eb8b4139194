"""A document-first prompt's token ids with the document's part handled once per document: cut, rendered and
tokenized once, then each sub-question's part added.

The prompt is rendered once with a marker in the sub-question's place (through the chat template, as a whole prompt
is); the text before the marker holds the document and is the same for every sub-question. It is cut at the start of
the marker's line (the template's own characters: "Question: " under the crux prompts), and the document's part is
the tokens of the first pair's whole prompt that end before that cut. Each pair then tokenizes only a small window:
the last few tokens before the cut, its own question line and what follows. Where the window's first tokens are the
whole prompt's (nothing merged across the cut), the pair's ids are the document's part + the rest of the window;
otherwise that pair is tokenized whole, and counted. The first pair's ids are also checked against its whole
tokenization: a group whose first pair differs is tokenized whole. Only a fast tokenizer gives the offsets this
needs (`return_offsets_mapping`, transformers' PreTrainedTokenizerFast); with another, every prompt is tokenized whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from generation.judging.prompts import Prompt

MARKER = "\u0000sub-question\u0000"
WINDOW = 4  # tokens before the cut that each pair re-tokenizes: they show a merge across it
LONGEST_WORD = 32  # tokens the window may go further back to start at a word's beginning


class DocumentPrompts:
    """Token ids of a document's pairs, its part of the prompt tokenized once (see the module's text)."""

    def __init__(self, encoder, prompt: Prompt):
        self.encoder, self.prompt, self.tokenizer = encoder, prompt, encoder.tokenizer
        self.add_special = not encoder.chat_template
        self.usable = bool(getattr(self.tokenizer, "is_fast", False)) and prompt.document_first
        self.trailing: list[int] = []
        if self.usable and self.add_special:  # what the tokenizer appends after the text (BERT's [SEP])
            plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
            full = self.tokenizer("a", add_special_tokens=True)["input_ids"]
            start = next((i for i in range(len(full)) if full[i : i + len(plain)] == plain), None)
            self.usable = start is not None
            self.trailing = full[start + len(plain) :] if start is not None else []

    def encode_pairs(self, pairs, context) -> list[list[int] | None]:
        """`encode` of each document's pairs (objects with `question` and `document`), the document cut once by
        `context(pair)`; in the pairs' order."""
        by_document: dict[str, list[int]] = {}
        for i, pair in enumerate(pairs):
            by_document.setdefault(pair.document, []).append(i)
        token_ids: list[list[int] | None] = [None] * len(pairs)
        for members in by_document.values():
            encoded = self.encode([pairs[i].question for i in members], context(pairs[members[0]]))
            for i, ids in zip(members, encoded):
                token_ids[i] = ids
        return token_ids

    def encode(self, questions: Sequence[str], context: str) -> list[list[int] | None]:
        """Each question's prompt ids with `context` as its document; None where the pair is to be tokenized whole."""
        if not self.usable or not questions:
            return [None] * len(questions)
        rendered = self.encoder.render(self.prompt.messages(MARKER, context)).split(MARKER)
        if len(rendered) != 2 or "\n" not in rendered[0]:
            return [None] * len(questions)
        before, after = rendered
        cut = before.rfind("\n") + 1
        texts = [self._question(q) for q in questions]
        first = self.tokenizer(
            before + texts[0] + after, add_special_tokens=self.add_special, return_offsets_mapping=True
        )
        ids, offsets = first["input_ids"], first["offset_mapping"]
        part = next((k for k, (start, _) in enumerate(offsets) if start >= cut), None)
        if part is None or part <= WINDOW or offsets[part - 1][1] > cut:
            return [None] * len(questions)
        window = self._window_start(before, offsets, part)
        windows = self.tokenizer(
            [before[offsets[window][0] :] + text + after for text in texts], add_special_tokens=False
        )["input_ids"]
        head, overlap = ids[:part], ids[window:part]
        encoded = [
            head + tokens[len(overlap) :] + self.trailing if tokens[: len(overlap)] == overlap else None
            for tokens in windows
        ]
        if encoded[0] != ids:
            return [None] * len(questions)
        return encoded

    def _question(self, question: str) -> str:
        return self.prompt.question_text(question) if self.prompt.question_text is not None else question

    @staticmethod
    def _window_start(text: str, offsets, part: int) -> int:
        """The token WINDOW before the cut, moved back to the first token of its word (a word's inner piece, such
        as WordPiece's "##ing", tokenizes differently at the start of a text)."""
        window = part - WINDOW
        for _ in range(LONGEST_WORD):
            start = offsets[window][0]
            if window == 0 or start == 0 or offsets[window - 1][1] < start or not text[start - 1].isalnum():
                break
            window -= 1
        return window


def document_pieces(documents: Sequence[str], size: int) -> list[list[int]]:
    """Positions of the pairs, cut into pieces of whole documents (a document's pairs never in two pieces), a piece
    closed once it holds `size` pairs or more; in the documents' first-seen order."""
    by_document: dict[str, list[int]] = {}
    for i, document in enumerate(documents):
        by_document.setdefault(document, []).append(i)
    pieces: list[list[int]] = [[]]
    for members in by_document.values():
        if len(pieces[-1]) >= size:
            pieces.append([])
        pieces[-1].extend(members)
    return [piece for piece in pieces if piece]


def pipelined(pieces: Sequence, prepare: Callable, run: Callable) -> list:
    """`run(piece, prepare(piece))` for each piece, the next piece prepared in a thread while this one runs (a fast
    tokenizer's batch encoding and torch's kernels release the GIL). Returns the runs' results in order."""
    results = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        upcoming = pool.submit(prepare, pieces[0]) if pieces else None
        for n, piece in enumerate(pieces):
            assert upcoming is not None  # piece n was submitted before the loop or in the previous round
            prepared = upcoming.result()
            if n + 1 < len(pieces):
                upcoming = pool.submit(prepare, pieces[n + 1])
            results.append(run(piece, prepared))
    return results
