"""Scoring-throughput benchmark: score the validation set repeatedly for a fixed duration."""

import argparse
import time

import yaml

from charlm.data import load_jsonl
from charlm.device import get_backend
from charlm.metrics import corpus_scores
from charlm.ngram import CharNgramLM


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--duration", type=float, default=12.0, help="seconds of scoring")
    args = parser.parse_args()

    with open(args.config) as fh:
        cfg = yaml.safe_load(fh)
    xp = get_backend(cfg["device"])
    data = cfg["data"]
    train = load_jsonl(data["train_file"], data["lowercase"])
    valid = load_jsonl(data["valid_file"], data["lowercase"])
    m = cfg["model"]
    model = CharNgramLM(m["order"], m["k"], xp).fit(train)
    print(f"Benchmarking order-{m['order']} model on {cfg['device']} for {args.duration:.0f} s")

    start = last_report = time.perf_counter()
    chars = passes = 0
    while time.perf_counter() - start < args.duration:
        scores = corpus_scores(model, valid)
        chars += scores["n_chars"]
        passes += 1
        now = time.perf_counter()
        if now - last_report >= 2.0:
            print(f"[{now - start:5.1f} s] {passes} passes, {chars / (now - start):,.0f} chars/s", flush=True)
            last_report = now
    elapsed = time.perf_counter() - start
    print(f"Done: {passes} passes over the validation set, {chars / elapsed:,.0f} chars/s, "
          f"perplexity {scores['perplexity']:.4f}")


if __name__ == "__main__":
    main()
