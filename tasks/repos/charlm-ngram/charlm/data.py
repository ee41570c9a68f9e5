"""Reading JSON-lines corpora."""

import json

BOS = "\x02"
EOS = "\x03"


def load_jsonl(path, lowercase=False, max_lines=None):
    docs = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if max_lines is not None and len(docs) >= max_lines:
                break
            line = line.strip()
            if not line:
                continue
            text = json.loads(line)["text"]
            docs.append(text.lower() if lowercase else text)
    return docs
