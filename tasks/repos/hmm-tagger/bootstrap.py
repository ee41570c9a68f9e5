"""Bootstrap confidence interval of tagging accuracy, resampling test sentences until a time budget is spent."""

import argparse
import json
import time

import numpy as np

from hmm.corpus import read_conll
from hmm.metrics import tagging_scores
from hmm.model import HMMTagger


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hparams", default="hparams.json")
    parser.add_argument("--budget_seconds", type=float, default=12.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with open(args.hparams) as fh:
        hp = json.load(fh)
    train = read_conll(hp["train_file"], hp["lowercase"])
    test = read_conll(hp["test_file"], hp["lowercase"])
    tagger = HMMTagger(hp["smoothing"], hp["unk_threshold"]).fit(train)
    print(f"Tagger ready ({tagger.n_params} parameters); bootstrapping for {args.budget_seconds:.0f} s")

    rng = np.random.default_rng(args.seed)
    accs = []
    start = time.perf_counter()
    while time.perf_counter() - start < args.budget_seconds:
        sample = [test[i] for i in rng.integers(0, len(test), size=len(test))]
        preds = [tagger.viterbi([w for w, _ in s]) for s in sample]
        accs.append(tagging_scores(sample, preds, tagger.is_known)["accuracy"])
        if len(accs) % 50 == 0:
            print(f"{len(accs)} resamples, mean accuracy {np.mean(accs):.4f}", flush=True)
    lo, hi = np.percentile(accs, [2.5, 97.5])
    print(f"{len(accs)} resamples: accuracy 95% CI [{lo:.4f}, {hi:.4f}]")


if __name__ == "__main__":
    main()
