"""Reading review TSV files and turning them into bag-of-words count matrices."""

import csv
from collections import Counter

import numpy as np


def read_tsv(path, lowercase=True, max_rows=None):
    texts, labels = [], []
    with open(path, encoding="utf-8") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        for i, row in enumerate(reader):
            if max_rows is not None and i >= max_rows:
                break
            text = row["text"].lower() if lowercase else row["text"]
            texts.append(text.split())
            labels.append(int(row["label"]))
    return texts, np.array(labels, dtype=np.int64)


def build_vocab(texts, max_vocab, min_count):
    counts = Counter(tok for toks in texts for tok in toks)
    # sort by frequency, then alphabetically, so the vocabulary is deterministic
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    items = [(tok, c) for tok, c in items if c >= min_count][:max_vocab]
    return {tok: i for i, (tok, _) in enumerate(items)}


def vectorize(texts, vocab):
    x = np.zeros((len(texts), len(vocab)), dtype=np.float64)
    for i, toks in enumerate(texts):
        for tok in toks:
            j = vocab.get(tok)
            if j is not None:
                x[i, j] += 1.0
    # log-scaled term frequencies
    return np.log1p(x)
