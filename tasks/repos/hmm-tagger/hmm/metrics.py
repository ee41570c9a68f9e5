"""Token-level tagging accuracy, overall and split by known/unknown words."""


def tagging_scores(sentences, predictions, is_known):
    total = correct = known = known_correct = 0
    for sent, pred in zip(sentences, predictions):
        for (word, gold), tag in zip(sent, pred):
            hit = gold == tag
            total += 1
            correct += hit
            if is_known(word):
                known += 1
                known_correct += hit
    unknown = total - known
    return {
        "accuracy": correct / total,
        "known_accuracy": known_correct / known if known else 0.0,
        "unknown_accuracy": (correct - known_correct) / unknown if unknown else 0.0,
        "n_tokens": total,
        "n_unknown": unknown,
    }
