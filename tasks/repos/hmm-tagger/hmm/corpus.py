"""Reading CoNLL-style tagged corpora."""


def read_conll(path, lowercase=False):
    sentences, current = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                if current:
                    sentences.append(current)
                current = []
                continue
            word, tag = line.split("\t")
            current.append((word.lower() if lowercase else word, tag))
    if current:
        sentences.append(current)
    return sentences
