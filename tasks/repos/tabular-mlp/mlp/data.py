"""Loading the CSV splits into feature matrices and label vectors."""

import csv

import numpy as np


def load_csv(path, label_column, max_rows=-1):
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if max_rows is not None and max_rows >= 0:
        rows = rows[:max_rows]
    feature_names = [k for k in rows[0] if k != label_column]
    x = np.array([[float(r[k]) for k in feature_names] for r in rows], dtype=np.float64)
    y = np.array([int(r[label_column]) for r in rows], dtype=np.int64)
    return x, y, feature_names


class Standardizer:
    def fit(self, x):
        self.mean = x.mean(axis=0)
        self.std = x.std(axis=0) + 1e-8
        return self

    def transform(self, x):
        return (x - self.mean) / self.std
