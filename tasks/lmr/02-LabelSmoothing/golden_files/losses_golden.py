"""Losses of a small classifier, over natural-log class probabilities (plain Python lists)."""


class CrossEntropyLoss:
    """Plain cross-entropy: the mean of -log p(target) over a batch's rows."""

    def forward(self, log_probs, targets):
        return -sum(row[t] for row, t in zip(log_probs, targets)) / len(targets)


class LabelSmoothingLoss:
    """Cross-entropy against targets smoothed towards the uniform distribution."""

    def __init__(self, smoothing=0.1):
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), not {smoothing}")
        self.smoothing = smoothing

    def forward(self, log_probs, targets):
        """The label-smoothed cross-entropy of a batch, averaged over its rows.

        log_probs: one list of K natural-log class probabilities per row.
        targets: the target class (0..K-1) of each row.
        """
        eps = self.smoothing
        total = 0.0
        for row, target in zip(log_probs, targets):
            uniform = sum(row) / len(row)
            total += -((1.0 - eps) * row[target] + eps * uniform)
        loss = total / len(targets)
        return loss
