"""Train the HMM tagger, tag the test set and score the predictions."""

import argparse
import json
import os
import sys

from hmm.corpus import read_conll
from hmm.metrics import tagging_scores
from hmm.model import HMMTagger


def confirm_overwrite(path, assume_yes):
    if not os.path.exists(path) or assume_yes:
        return True
    answer = input(f"{path} already exists. Overwrite it? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hparams", default="hparams.json")
    parser.add_argument("--smoothing", type=float, default=None)
    parser.add_argument("--out_dir", default="outputs")
    parser.add_argument("--yes", action="store_true", help="overwrite existing outputs without asking")
    args = parser.parse_args()

    with open(args.hparams) as fh:
        hp = json.load(fh)
    if args.smoothing is not None:
        hp["smoothing"] = args.smoothing
    pred_path = os.path.join(args.out_dir, "predictions.tsv")
    if not confirm_overwrite(pred_path, args.yes):
        print("Aborted: existing predictions kept.")
        sys.exit(1)

    train = read_conll(hp["train_file"], hp["lowercase"])
    test = read_conll(hp["test_file"], hp["lowercase"])
    tagger = HMMTagger(hp["smoothing"], hp["unk_threshold"]).fit(train)
    print(f"Trained on {len(train)} sentences: {len(tagger.tags)} tags, {len(tagger.words)} word types, "
          f"{tagger.n_params} parameters")

    predictions = [tagger.viterbi([w for w, _ in sent]) for sent in test]
    scores = tagging_scores(test, predictions, tagger.is_known)
    print(f"Tagged {len(test)} test sentences ({scores['n_tokens']} tokens, {scores['n_unknown']} unknown)")
    print(f"accuracy {scores['acc']:.4f} | known {scores['known_acc']:.4f} | unknown {scores['unknown_acc']:.4f}")

    os.makedirs(args.out_dir, exist_ok=True)
    with open(pred_path, "w") as fh:
        for sent, pred in zip(test, predictions):
            for (word, gold), tag in zip(sent, pred):
                fh.write(f"{word}\t{gold}\t{tag}\n")
            fh.write("\n")
    with open(os.path.join(args.out_dir, "scores.json"), "w") as fh:
        json.dump(scores, fh, indent=2)
    print(f"Saved predictions and scores to {args.out_dir}/")


if __name__ == "__main__":
    main()
