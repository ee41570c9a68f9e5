"""Train and evaluate the bag-of-words sentiment classifier."""

import argparse
import json
import os

import numpy as np

from bow.data import build_vocab, read_tsv, vectorize
from bow.metrics import accuracy, macro_f1
from bow.model import LogisticRegression


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="config.json")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--batch_size", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max_train_rows", type=int, default=None)
    parser.add_argument("--output_dir", default="results")
    return parser.parse_args()


def main():
    args = parse_args()
    with open(args.config) as fh:
        cfg = json.load(fh)
    hp = dict(cfg["train"])
    for key in ("epochs", "lr", "batch_size", "seed"):
        if getattr(args, key) is not None:
            hp[key] = getattr(args, key)
    print(f"Hyperparameters: {json.dumps(hp, sort_keys=True)}")

    train_texts, y_train = read_tsv(
        cfg["data"]["train_file"], cfg["data"]["lowercase"], args.max_train_rows
    )
    test_texts, y_test = read_tsv(cfg["data"]["test_file"], cfg["data"]["lowercase"])
    vocab = build_vocab(train_texts, cfg["model"]["max_vocab"], cfg["model"]["min_count"])
    x_train, x_test = vectorize(train_texts, vocab), vectorize(test_texts, vocab)
    print(f"Loaded {len(y_train)} training and {len(y_test)} test reviews, vocabulary size {len(vocab)}")

    model = LogisticRegression(len(vocab), l2=cfg["model"]["l2"])
    rng = np.random.default_rng(hp["seed"])
    bs = hp["batch_size"]
    for epoch in range(1, hp["epochs"] + 1):
        order = rng.permutation(len(y_train))
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            model.sgd_step(x_train[idx], y_train[idx], hp["lr"])
        train_loss = model.loss(x_train, y_train)
        train_acc = accuracy(y_train, model.predict(x_train))
        print(f"Epoch {epoch}/{hp['epochs']} | train loss {train_loss:.4f} | train acc {train_acc:.4f}")

    y_pred = model.predict(x_test)
    metrics = {
        "test_accuracy": accuracy(y_test, y_pred),
        "test_macro_f1": macro_f1(y_test, y_pred),
        "test_loss": model.loss(x_test, y_test),
        "epochs": hp["epochs"],
    }
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "metrics.json")
    with open(path, "w") as fh:
        json.dump(metrics, fh, indent=2)
    print(f"Training finished. Test metrics written to {path}")


if __name__ == "__main__":
    main()
