"""Add-k smoothed character n-gram model."""

from collections import Counter

from .data import BOS, EOS


class CharNgramLM:
    def __init__(self, order, k, xp):
        self.order = order
        self.k = k
        self.xp = xp

    def fit(self, docs):
        self.vocab = sorted({c for d in docs for c in d} | {EOS})
        self.ngram_counts = Counter()
        self.context_counts = Counter()
        for doc in docs:
            chars = [BOS] * (self.order - 1) + list(doc) + [EOS]
            for i in range(self.order - 1, len(chars)):
                ctx = "".join(chars[i - self.order + 1 : i])
                self.ngram_counts[ctx, chars[i]] += 1
                self.context_counts[ctx] += 1
        return self

    def log_probs(self, doc):
        """Natural-log probabilities of every character of `doc` and of its end marker."""
        chars = [BOS] * (self.order - 1) + list(doc) + [EOS]
        num, den = [], []
        v = len(self.vocab) + 1  # + unknown character
        for i in range(self.order - 1, len(chars)):
            ctx = "".join(chars[i - self.order + 1 : i])
            num.append(self.ngram_counts.get((ctx, chars[i]), 0) + self.k)
            den.append(self.context_counts.get(ctx, 0) + self.k * v)
        xp = self.xp
        return xp.log(xp.asarray(num, dtype=xp.float64)) - xp.log(xp.asarray(den, dtype=xp.float64))
