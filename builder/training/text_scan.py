"""Does a folder hold any of the document texts a model was trained on? Checked before a model leaves the machine
(`researchy-subq train --push-to-hub`): ClueWeb22's licence forbids redistributing its text, and a model folder can
carry it (sentence-transformers' generated README takes widget examples and a samples table from the training
data).

Every file of the folder is read as bytes, in every form builder/training/text_forms.py reads (as stored, UTF-16,
base64 and gzip, one inside the other up to three layers; JSON and HTML escapes undone), and its texts are cut into
word shingles: SHINGLE_WORDS consecutive words, lower-cased, a word being a run of Unicode letters and digits. Every
text of the `texts` folder is cut the same way and its shingles looked up among the folder's. A text shorter than
SHINGLE_WORDS words is looked up whole when it has MIN_WORDS or more; shorter ones are counted, not checked. A file
holding more decoded bytes than the scan reads is named in `ScanResult.unread`, never passed as clean. Memory: the
folder's shingles (a few hundred thousand for a MiniLM) and one batch of texts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.training.text_forms import DECODED_BYTES, DecodeBudget, file_texts

SHINGLE_WORDS = 8
MIN_WORDS = 4
BATCH_TEXTS = 2_000
WORD_BREAK = r"[^\p{L}\p{N}]+"  # RE2: what is not a Unicode letter or digit
PRIME = np.uint64(1_099_511_628_211)  # FNV's 64-bit prime: a multiplier for the rolling shingle hash


@dataclass
class TextFound:
    file: str  # relative to the scanned folder
    docid: str
    words: str  # the shingle, as words


@dataclass
class ScanResult:
    texts: int = 0
    too_short: int = 0  # texts under MIN_WORDS words: not checked
    found: list[TextFound] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)  # files holding more decoded bytes than the scan reads

    @property
    def clean(self) -> bool:
        return not self.found and not self.unread


def _words(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each word's hash and the index of the text it is in, in order (the same rule on both sides of the scan)."""
    lists = pc.split_pattern_regex(pc.utf8_lower(texts), WORD_BREAK)
    words = pc.list_flatten(lists)
    owner = pc.list_parent_indices(lists)
    kept = pc.not_equal(words, "")
    words, owner = pc.filter(words, kept), pc.filter(owner, kept)
    if not len(words):
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    encoded = pc.dictionary_encode(words)
    hashes = np.fromiter((hash(w) for w in encoded.dictionary.to_pylist()), np.int64).view(np.uint64)
    return hashes[encoded.indices.to_numpy(zero_copy_only=False)], np.asarray(owner, dtype=np.int64)


def _rolled(columns: list[np.ndarray], length: int) -> np.ndarray:
    """The shingle hash of `length` words, given as `length` arrays (word j of every shingle in columns[j])."""
    rolled = np.zeros(len(columns[0]), np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            rolled = rolled * PRIME + column
    return rolled ^ np.uint64(length)


def _shingles(hashes: np.ndarray, owner: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The hash of every run of `length` words inside one text, and the word where each starts."""
    count = len(hashes) - length + 1
    if count <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    inside = np.flatnonzero(owner[:count] == owner[length - 1 :])
    return _rolled([hashes[j : j + count][inside] for j in range(length)], length), inside


class FolderShingles:
    """Every shingle of a folder's files (MIN_WORDS up to SHINGLE_WORDS words, so a short text can be looked up
    whole), with the first file holding each; `holds` tests many hashes at once (a bitmap first, then a sorted
    array)."""

    BITMAP = 1 << 24

    def __init__(self, folder: Path, decoded_bytes: int = DECODED_BYTES):
        folder = Path(folder)
        self.files: dict[int, str] = {}  # shingle hash -> the first file holding it
        self.unread: list[str] = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            name, budget = str(path.relative_to(folder)), DecodeBudget(decoded_bytes)
            runs = list(file_texts(path, budget))
            if budget.exceeded:
                self.unread.append(name)
            for start in range(0, len(runs), BATCH_TEXTS):
                hashes, owner = _words(pa.array(runs[start : start + BATCH_TEXTS], pa.string()))
                for length in range(MIN_WORDS, SHINGLE_WORDS + 1):
                    for value in _shingles(hashes, owner, length)[0].tolist():
                        self.files.setdefault(value, name)
        self.sorted = np.sort(np.fromiter(self.files, np.uint64, count=len(self.files)))
        self.bitmap = np.zeros(self.BITMAP, bool)
        self.bitmap[self.sorted & np.uint64(self.BITMAP - 1)] = True

    def holds(self, values: np.ndarray) -> np.ndarray:
        maybe = np.flatnonzero(self.bitmap[values & np.uint64(self.BITMAP - 1)])
        found = np.zeros(len(values), bool)
        if len(maybe):
            at = np.minimum(np.searchsorted(self.sorted, values[maybe]), len(self.sorted) - 1)
            found[maybe] = self.sorted[at] == values[maybe]
        return found


def _matches(batch: pa.RecordBatch, folder: FolderShingles, result: ScanResult) -> None:
    """The texts of `batch` with a shingle the folder holds go to `result.found`."""
    hashes, owner = _words(batch["text"])
    counts = np.bincount(owner, minlength=batch.num_rows)
    result.texts += batch.num_rows
    result.too_short += int((counts < MIN_WORDS).sum())
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    candidates = [_shingles(hashes, owner, SHINGLE_WORDS)]
    for length in range(MIN_WORDS, SHINGLE_WORDS):  # a short text, whole
        first = starts[counts == length]
        candidates.append((_rolled([hashes[first + j] for j in range(length)], length), first))
    for values, at in candidates:
        for value, position in zip(*(a[folder.holds(values)].tolist() for a in (values, at))):
            text = int(owner[position])
            file, docid = folder.files[value], batch["docid"][text].as_py()
            if any((f.file, f.docid) == (file, docid) for f in result.found):
                continue  # one finding per file and document, not one per shingle
            words = pc.split_pattern_regex(pc.utf8_lower(batch["text"][text : text + 1]), WORD_BREAK)
            words = [w for w in words[0].as_py() if w][position - int(starts[text]) :][:SHINGLE_WORDS]
            result.found.append(TextFound(file, docid, " ".join(words)))


def scan_folder(
    folder: Path, text_files: list[Path], limit: int = 10, decoded_bytes: int = DECODED_BYTES
) -> ScanResult:
    """The texts (`docid`, `text` of each of `text_files`, the Parquet files `researchy-subq texts` writes) found in
    any file of `folder`, and the files holding more than `decoded_bytes` of decoded bytes; stops after `limit`
    findings."""
    shingles = FolderShingles(folder, decoded_bytes)
    result = ScanResult(unread=shingles.unread)
    for path in text_files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_TEXTS, columns=["docid", "text"]):
            _matches(batch, shingles, result)
            if len(result.found) >= limit:
                del result.found[limit:]
                return result
    return result
