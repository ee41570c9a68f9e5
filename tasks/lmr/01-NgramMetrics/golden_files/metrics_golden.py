"""The metrics of a language model, from the natural-log probabilities of a sequence's tokens."""

import math


def _check(log_probs):
    if not log_probs:
        raise ValueError("an empty sequence has no perplexity")


def perplexity(log_probs):
    """The perplexity of a sequence: exp of the mean negative log-probability.

    log_probs: the natural-log probability of each token (a list of floats).
    Raises ValueError for an empty sequence.
    """
    _check(log_probs)
    ppl = math.exp(-sum(log_probs) / len(log_probs))
    return ppl


def bits_per_char(log_probs):
    """The average negative log-probability of a sequence's characters, in bits.

    log_probs: the natural-log probability of each character (a list of floats).
    Raises ValueError for an empty sequence.
    """
    _check(log_probs)
    bpc = -sum(log_probs) / len(log_probs) / math.log(2)
    return bpc
