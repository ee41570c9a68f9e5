"""One-hidden-layer MLP with ReLU, softmax output and cross-entropy loss."""

import numpy as np


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class MLP:
    def __init__(self, n_in, n_hidden, n_out, rng):
        self.w1 = rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_in, n_hidden))
        self.b1 = np.zeros(n_hidden)
        self.w2 = rng.normal(0.0, np.sqrt(1.0 / n_hidden), size=(n_hidden, n_out))
        self.b2 = np.zeros(n_out)

    def forward(self, x):
        self._x = x
        self._h_pre = x @ self.w1 + self.b1
        self._h = np.maximum(self._h_pre, 0.0)
        return softmax(self._h @ self.w2 + self.b2)

    def loss(self, probs, y):
        return float(-np.mean(np.log(probs[np.arange(len(y)), y] + 1e-12)))

    def backward(self, probs, y):
        n = len(y)
        dlogits = probs.copy()
        dlogits[np.arange(n), y] -= 1.0
        dlogits /= n
        grads = {
            "w2": self._h.T @ dlogits,
            "b2": dlogits.sum(axis=1),
        }
        dh = (dlogits @ self.w2.T) * (self._h_pre > 0)
        grads["w1"] = self._x.T @ dh
        grads["b1"] = dh.sum(axis=0)
        return grads

    def step(self, grads, lr, weight_decay):
        for name, g in grads.items():
            param = getattr(self, name)
            if name.startswith("w"):
                g = g + weight_decay * param
            param -= lr * g

    def predict(self, x):
        return self.forward(x).argmax(axis=1)
