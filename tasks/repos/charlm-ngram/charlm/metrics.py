"""Perplexity and bits per character."""

import math


def corpus_scores(model, docs):
    total_logp, n_chars = 0.0, 0
    for doc in docs:
        lp = model.log_probs(doc)
        total_logp += float(lp.sum())
        n_chars += int(lp.shape[0])
    nll = -total_logp / n_chars
    return {"perplexity": math.exp(nll), "bpc": nll / math.log(2), "n_chars": n_chars}
