"""A numpy multi-layer perceptron for tabular classification."""
