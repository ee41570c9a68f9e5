"""Train the MLP on the training split and evaluate it on the test split."""

import argparse
import configparser
import json
import os

from mlp.metrics import accuracy, macro_f1
from mlp.training import load_splits, train_model


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="configs/default.ini")
    parser.add_argument("--output", default="results/eval.json")
    args = parser.parse_args()

    cfg = configparser.ConfigParser()
    if not cfg.read(args.config):
        raise SystemExit(f"config file {args.config} not found")
    x_train, y_train, x_test, y_test = load_splits(cfg)
    print(f"train: {x_train.shape[0]} rows x {x_train.shape[1]} features | test: {x_test.shape[0]} rows")

    model, epochs = train_model(cfg, x_train, y_train)
    y_pred = model.predict(x_test)
    n_classes = cfg["model"].getint("n_classes")
    result = {
        "epochs": epochs,
        "test_accuracy": accuracy(y_test, y_pred),
        "test_macro_f1": macro_f1(y_test, y_pred, n_classes),
    }
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"done after {epochs} epochs; evaluation saved to {args.output}")


if __name__ == "__main__":
    main()
