"""Fit a character n-gram LM and evaluate it on the validation file."""

import argparse
import json
import os

import yaml

from charlm.data import load_jsonl
from charlm.device import get_backend
from charlm.metrics import corpus_scores
from charlm.ngram import CharNgramLM


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--max_lines", type=int, default=None, help="use the first N training documents")
    parser.add_argument("--output_dir", default="results")
    args = parser.parse_args()

    with open(args.config) as fh:
        cfg = yaml.safe_load(fh)
    xp = get_backend(cfg["device"])
    data = cfg["data"]
    train = load_jsonl(data["train_file"], data["lowercase"], args.max_lines)
    valid = load_jsonl(data["valid_file"], data["lowercase"])
    print(f"Loaded {len(train)} training and {len(valid)} validation documents")

    m = cfg["model"]
    model = CharNgramLM(m["order"], m["k"], xp).fit(train)
    print(f"Fitted order-{m['order']} model (k={m['k']}): {len(model.vocab)} symbols, "
          f"{len(model.ngram_counts)} distinct n-grams")

    scores = corpus_scores(model, valid)
    print(f"Validation: perplexity {scores['perplexity']:.4f} | bpc {scores['bpc']:.4f} | chars {scores['n_chars']}")
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "valid_metrics.json"), "w") as fh:
        json.dump(scores, fh, indent=2)


if __name__ == "__main__":
    main()
