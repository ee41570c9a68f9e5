"""Compute-matched learning-rate sweep: every run gets the same wall-clock budget."""

import argparse
import configparser

from mlp.metrics import accuracy
from mlp.training import load_splits, train_model


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="configs/default.ini")
    parser.add_argument("--lrs", default="0.01,0.05,0.2", help="comma-separated learning rates")
    parser.add_argument("--seconds_per_run", type=float, default=4.0)
    args = parser.parse_args()

    cfg = configparser.ConfigParser()
    if not cfg.read(args.config):
        raise SystemExit(f"config file {args.config} not found")
    x_train, y_train, x_test, y_test = load_splits(cfg)
    for lr in (float(v) for v in args.lrs.split(",")):
        print(f"== lr {lr}: training for {args.seconds_per_run:.0f} s", flush=True)
        model, epochs = train_model(cfg, x_train, y_train, lr=lr, time_budget=args.seconds_per_run, log=None)
        acc = accuracy(y_test, model.predict(x_test))
        print(f"lr {lr}: {epochs} epochs in budget, test accuracy {acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
