"""The training loop shared by train.py and sweep.py."""

import time

import numpy as np

from .data import Standardizer, load_csv
from .model import MLP


def load_splits(cfg):
    d = cfg["data"]
    x_train, y_train, _ = load_csv(d["train_file"], d["label_column"], d.getint("max_train_rows"))
    x_test, y_test, _ = load_csv(d["test_file"], d["label_column"])
    if d.getboolean("standardize"):
        scaler = Standardizer().fit(x_train)
        x_train, x_test = scaler.transform(x_train), scaler.transform(x_test)
    return x_train, y_train, x_test, y_test


def train_model(cfg, x, y, lr=None, epochs=None, time_budget=None, log=print):
    """Train for `epochs` epochs, or for `time_budget` seconds when it is given."""
    t = cfg["train"]
    lr = t.getfloat("lr") if lr is None else lr
    epochs = t.getint("epochs") if epochs is None else epochs
    rng = np.random.default_rng(t.getint("seed"))
    model = MLP(x.shape[1], cfg["model"].getint("hidden_size"), cfg["model"].getint("n_classes"), rng)
    bs, wd, log_every = t.getint("batch_size"), t.getfloat("weight_decay"), t.getint("log_every")
    start = time.perf_counter()
    epoch = 0
    while True:
        if time_budget is None and epoch >= epochs:
            break
        if time_budget is not None and time.perf_counter() - start >= time_budget:
            break
        epoch += 1
        order = rng.permutation(len(y))
        for i in range(0, len(y), bs):
            idx = order[i : i + bs]
            probs = model.forward(x[idx])
            model.step(model.backward(probs, y[idx]), lr, wd)
        if log is not None and (epoch % log_every == 0 or epoch == 1 or epoch == epochs):
            probs = model.forward(x)
            acc = float(np.mean(probs.argmax(axis=1) == y))
            log(f"epoch {epoch:4d} | train loss {model.loss(probs, y):.4f} | train acc {acc:.4f}")
    return model, epoch
