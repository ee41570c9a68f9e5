"""Binary logistic regression trained with mini-batch SGD."""

import numpy as np


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


class LogisticRegression:
    def __init__(self, n_features, l2=0.0):
        self.w = np.zeros(n_features, dtype=np.float_)
        self.b = 0.0
        self.l2 = l2

    def predict_proba(self, x):
        return sigmoid(x @ self.w + self.b)

    def predict(self, x):
        return (self.predict_proba(x) >= 0.5).astype(np.int64)

    def loss(self, x, y):
        p = np.clip(self.predict_proba(x), 1e-12, 1 - 1e-12)
        nll = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        return float(nll + 0.5 * self.l2 * np.sum(self.w**2))

    def sgd_step(self, x, y, lr):
        p = self.predict_proba(x)
        grad = p - y
        self.w -= lr * (x.T @ grad / len(y) + self.l2 * self.w)
        self.b -= lr * float(np.mean(grad))
