"""Generate the small datasets shipped inside the demo research repositories (run once).

Owns: the deterministic data files under tasks/repos/<name>/data/. Everything is drawn from
`random.Random(seed)` with fixed seeds, so rerunning this script rewrites identical bytes.
The files are committed as plain files; build_mirrors.py never calls this script.

    python tasks/repos/make_demo_data.py
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- bow-sentiment: movie-review-like sentences, TSV label<TAB>text --------------------------

POS = [
    "great",
    "wonderful",
    "moving",
    "superb",
    "charming",
    "delightful",
    "brilliant",
    "memorable",
    "touching",
    "funny",
]
NEG = [
    "boring",
    "dull",
    "awful",
    "clumsy",
    "tedious",
    "messy",
    "bland",
    "predictable",
    "painful",
    "forgettable",
]
NEUTRAL_NOUNS = [
    "plot",
    "acting",
    "script",
    "soundtrack",
    "ending",
    "cast",
    "direction",
    "pacing",
    "dialogue",
    "camera",
]
FILLERS = [
    "the",
    "film",
    "was",
    "really",
    "quite",
    "a",
    "bit",
    "overall",
    "and",
    "but",
    "honestly",
    "i",
    "think",
    "this",
    "movie",
]


def _review(rng: random.Random, label: int) -> str:
    own, other = (POS, NEG) if label == 1 else (NEG, POS)
    words: list[str] = []
    for _ in range(rng.randint(2, 4)):
        words.append(rng.choice(FILLERS))
        words.append(rng.choice(NEUTRAL_NOUNS))
        words.append("was")
        # mostly sentiment-consistent words, sometimes a contrasting one (hard examples)
        words.append(rng.choice(own) if rng.random() < 0.72 else rng.choice(other))
    if rng.random() < 0.3:
        words += ["not", rng.choice(other)]
    return " ".join(words)


def make_bow_sentiment() -> None:
    rng = random.Random(1234)
    root = HERE / "bow-sentiment" / "data"
    for split, n in (("train", 320), ("test", 120)):
        lines = ["label\ttext"]
        for _ in range(n):
            label = rng.randint(0, 1)
            lines.append(f"{label}\t{_review(rng, label)}")
        _write_lines(root / f"{split}.tsv", lines)


# --- charlm-ngram: short sentences from a toy grammar, CSV id,text --------------------------

SUBJ = [
    "the cat",
    "a dog",
    "my neighbour",
    "the old sailor",
    "our teacher",
    "the small robot",
    "a quiet child",
]
VERB = ["sees", "likes", "paints", "follows", "remembers", "describes", "carries", "finds"]
OBJ = [
    "the red boat",
    "a green apple",
    "the long river",
    "an empty house",
    "the morning train",
    "a paper kite",
]
TAIL = [
    "today",
    "at night",
    "in the rain",
    "near the harbour",
    "with care",
    "again",
    "before dinner",
]


def _sentence(rng: random.Random) -> str:
    s = f"{rng.choice(SUBJ)} {rng.choice(VERB)} {rng.choice(OBJ)}"
    if rng.random() < 0.6:
        s += f" {rng.choice(TAIL)}"
    if rng.random() < 0.25:
        s += f", and {rng.choice(SUBJ)} {rng.choice(VERB)} {rng.choice(OBJ)}"
    s = s[0].upper() + s[1:] + rng.choice([".", ".", ".", "!", "?"])
    return s


def make_charlm() -> None:
    rng = random.Random(99)
    root = HERE / "charlm-ngram" / "data"
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 400), ("valid", 60)):
        with (root / f"{split}.csv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["id", "text"])
            for i in range(n):
                w.writerow([f"{split}-{i:04d}", _sentence(rng)])


# --- tabular-mlp: three overlapping Gaussian classes, 8 features, CSV -------------------------


def make_tabular() -> None:
    rng = random.Random(7)
    root = HERE / "tabular-mlp" / "data"
    centers = [
        [rng.uniform(-1.5, 1.5) for _ in range(8)],
        [rng.uniform(-1.5, 1.5) for _ in range(8)],
        [rng.uniform(-1.5, 1.5) for _ in range(8)],
    ]
    header = [
        "area",
        "perimeter",
        "compactness",
        "length",
        "width",
        "asymmetry",
        "groove",
        "density",
    ]
    for split, n in (("train", 480), ("test", 150)):
        lines = [",".join([*header, "variety"])]
        for _ in range(n):
            y = rng.randint(0, 2)
            feats = [c + rng.gauss(0.0, 1.3) for c in centers[y]]
            # a nonlinear feature so that the hidden layer matters
            feats[7] = math.tanh(feats[0] * feats[1]) + rng.gauss(0.0, 0.3)
            scaled = [
                f * s + o
                for f, s, o in zip(
                    feats,
                    (3, 2, 0.1, 0.5, 0.4, 1, 0.5, 1),
                    (14, 14, 0.87, 5.6, 3.2, 3.7, 5.4, 0),
                    strict=True,
                )
            ]
            lines.append(",".join(f"{v:.4f}" for v in scaled) + f",{y}")
        _write_lines(root / f"{split}.csv", lines)


# --- hmm-tagger: tagged sentences from a toy grammar, CoNLL-style word<TAB>tag ----------------

LEX = {
    "DET": ["the", "a", "this", "every"],
    "NOUN": ["dog", "park", "runs", "book", "light", "watch", "plan", "duck", "river", "city"],
    "VERB": ["runs", "reads", "watch", "plan", "duck", "sees", "likes", "light", "walks", "finds"],
    "ADJ": ["old", "quick", "light", "green", "quiet", "small"],
    "ADP": ["in", "near", "with", "over"],
    "PRON": ["she", "he", "they", "we"],
    "ADV": ["quickly", "often", "never", "slowly"],
    "PUNCT": [".", "!"],
}
SYLLABLES = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "dor", "pin", "gra"]
SUFFIX = {"NOUN": "", "VERB": "s", "ADJ": "ish"}


def _rare_word(rng: random.Random, tag: str) -> str:
    stem = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
    return stem + SUFFIX[tag]


def _word(rng: random.Random, tag: str, rare: float) -> str:
    if tag in SUFFIX and rng.random() < rare:
        return _rare_word(rng, tag)
    return rng.choice(LEX[tag])


def _tagged_sentence(rng: random.Random, rare: float, noise: float) -> list[tuple[str, str]]:
    def np_() -> list[str]:
        tags = ["DET"] + (["ADJ"] if rng.random() < 0.4 else []) + ["NOUN"]
        return tags if rng.random() < 0.75 else ["PRON"]

    tags = np_()
    if rng.random() < 0.3:
        tags.append("ADV")
    tags.append("VERB")
    if rng.random() < 0.7:
        tags += np_() if tags[-1] != "PRON" else ["DET", "NOUN"]
    if rng.random() < 0.5:
        tags += ["ADP", "DET", "NOUN"]
    tags.append("PUNCT")
    out = []
    for t in tags:
        w = _word(rng, t, rare)
        # annotation noise: a few tokens carry a wrong tag, as in real treebanks
        out.append((w, rng.choice(sorted(LEX)) if rng.random() < noise else t))
    return out


def make_hmm() -> None:
    rng = random.Random(2024)
    root = HERE / "hmm-tagger" / "data"
    for split, n in (("train", 300), ("test", 80)):
        lines: list[str] = []
        for _ in range(n):
            for w, t in _tagged_sentence(rng, rare=0.12, noise=0.04):
                lines.append(f"{w}\t{t}")
            lines.append("")
        _write_lines(root / f"{split}.conll", lines[:-1])


if __name__ == "__main__":
    make_bow_sentiment()
    make_charlm()
    make_tabular()
    make_hmm()
    print("wrote demo data under", HERE)
