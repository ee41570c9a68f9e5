"""A character n-gram language model's metrics."""
