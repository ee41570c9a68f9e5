"""Hidden Markov model part-of-speech tagging."""
