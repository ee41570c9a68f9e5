"""A bigram HMM tagger: add-lambda smoothed transition/emission tables and Viterbi decoding."""

from collections import Counter

import numpy as np

UNK = "<UNK>"


class HMMTagger:
    def __init__(self, smoothing=0.1, unk_threshold=1):
        self.smoothing = smoothing
        self.unk_threshold = unk_threshold

    def fit(self, sentences):
        word_counts = Counter(w for s in sentences for w, _ in s)
        self.rare = {w for w, c in word_counts.items() if c <= self.unk_threshold}
        self.tags = sorted({t for s in sentences for _, t in s})
        self.words = sorted({w for w in word_counts if w not in self.rare} | {UNK})
        self.tag_index = {t: i for i, t in enumerate(self.tags)}
        self.word_index = {w: i for i, w in enumerate(self.words)}
        n_tags, n_words, lam = len(self.tags), len(self.words), self.smoothing

        start = np.full(n_tags, lam)
        trans = np.full((n_tags, n_tags), lam)
        emit = np.full((n_tags, n_words), lam)
        for sent in sentences:
            prev = None
            for word, tag in sent:
                t = self.tag_index[tag]
                emit[t, self.word_index[self._map(word)]] += 1
                if prev is None:
                    start[t] += 1
                else:
                    trans[prev, t] += 1
                prev = t
        self.log_start = np.log(start / start.sum())
        self.log_trans = np.log(trans / trans.sum(axis=1, keepdims=True))
        self.log_emit = np.log(emit / emit.sum(axis=1, keepdims=True))
        self.n_params = int(np.product(self.log_trans.shape) + np.product(self.log_emit.shape) + n_tags)
        return self

    def _map(self, word):
        return UNK if word in self.rare or word not in getattr(self, "word_index", {word: 0}) else word

    def is_known(self, word):
        return word in self.word_index and word != UNK

    def viterbi(self, words):
        obs = [self.word_index.get(w, self.word_index[UNK]) for w in words]
        n, k = len(obs), len(self.tags)
        score = np.empty((n, k))
        back = np.zeros((n, k), dtype=np.int64)
        score[0] = self.log_start + self.log_emit[:, obs[0]]
        for i in range(1, n):
            cand = score[i - 1][:, None] + self.log_trans
            back[i] = cand.argmax(axis=0)
            score[i] = cand.max(axis=0) + self.log_emit[:, obs[i]]
        path = [int(score[-1].argmax())]
        for i in range(n - 1, 0, -1):
            path.append(int(back[i, path[-1]]))
        return [self.tags[t] for t in reversed(path)]
