"""Character n-gram language models."""
