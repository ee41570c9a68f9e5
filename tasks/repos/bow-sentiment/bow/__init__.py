"""Bag-of-words logistic regression for review sentiment."""
