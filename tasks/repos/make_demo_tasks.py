"""Write the demo task files (tasks/expert, tasks/masked, tasks/auto) from one compact description.

Owns: the gold solutions of the demo Expert tasks, the way each Masked task is cut out of its
parent (which solution cells are pre-executed, which are left to the agent, what the remaining
goal is), and the Auto tasks. The YAML files it writes are the reviewed, committed artefacts;
rerun this script after changing a demo repository (its commit hashes change) and then rerun the
slow verification (tests/test_demo_repos.py), which measured every `answer` below.

    python tasks/repos/make_demo_tasks.py            # rewrite the task files
    python tasks/repos/make_demo_tasks.py --check    # exit 1 if a file differs from what it would write
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
TASKS = HERE.parent
sys.path.insert(0, str(HERE))

from build_mirrors import URL_PREFIX, build_mirrors, commit_hashes  # noqa: E402

REPORT = "(replace 0.0 with the actual values)."


def execute(code: str) -> dict:
    return {"execute": code.strip("\n") + "\n"}


def edit(file: str, before: str, after: str) -> dict:
    return {"edit": {"file": file, "before": before, "after": after}}


def query(task: str, report: str, shape: str, instructions: list[str], repo: str) -> str:
    lines = [f"{task} Report {report} as a json structured as follows: {shape} {REPORT}", ""]
    if instructions:
        lines.append("Additional instructions:")
        lines += [f"{i}. {text}" for i, text in enumerate(instructions, 1)]
        lines.append("")
    lines.append(f"Git repository: {URL_PREFIX}{repo}")
    return "\n".join(lines)


def print_answer(path: str, mapping: dict[str, str]) -> dict:
    """The last cell: read the run's result file and print the answer as JSON."""
    items = ", ".join(f'"{k}": round(m["{v}"], 4)' for k, v in mapping.items())
    return execute(
        f"""
import json

with open("{path}") as fh:
    m = json.load(fh)
print(json.dumps({{{items}}}))
"""
    )


@dataclass
class Expert:
    repo: str
    query: str
    answer: Any
    landmarks: list[str]
    cells: dict[str, dict]  # named cells, in solution order


@dataclass
class Masked:
    parent: str
    categories: list[str]
    pre: list[str]  # names of the parent's cells run before the agent starts
    goal: str  # what remains, after "Now, "
    solution: list[str] | None = None  # default: the parent's cells not in `pre`, in order
    extra: dict[str, dict] | None = None  # cells only this masked task uses


@dataclass
class Auto:
    id: str
    repo: str
    query: str
    entrypoint: str
    cells: list[dict]


def clone(repo: str) -> dict[str, dict]:
    return {
        "clone": execute(f"!git clone {URL_PREFIX}{repo}"),
        "cd": execute(f"%cd {repo}"),
        "checkout": execute("!git checkout {commit}"),
        "install": execute("!pip install -r requirements.txt"),
    }


# ------------------------------------------------------------------------------ Expert tasks

BOW = Expert(
    repo="bow-sentiment",
    query=query(
        "Train the bag-of-words logistic-regression sentiment classifier on the review data shipped "
        "with the repository and evaluate it on the test split.",
        "the test accuracy and the test macro-F1",
        '{"accuracy": 0.0, "macro_f1": 0.0}',
        [
            "Use the hyperparameters of the paper's run script (run.sh), except that you train for "
            "2 epochs only.",
            "Do not change the random seed or any other setting.",
        ],
        "bow-sentiment",
    ),
    answer={"accuracy": 0.7333, "macro_f1": 0.7333},
    landmarks=[
        r"Loaded 320 training and 120 test reviews",
        r'Hyperparameters: \{"batch_size": 16, "epochs": 2, "lr": 0\.5, "seed": 13\}',
        r"Epoch 2/2 \| train loss \d\.\d+",
        r"Test metrics written to results/paper/metrics\.json",
    ],
    cells={
        **clone("bow-sentiment"),
        "show_run": execute("!cat run.sh"),
        "pin_numpy": execute(
            """
# bow/model.py uses np.float_, which NumPy 2 removed; requirements.txt does not pin numpy
!pip install "numpy<2"
"""
        ),
        "train": execute(
            "!python train.py --config config.json --epochs 2 --lr 0.5 --batch_size 16 "
            "--output_dir results/paper"
        ),
        "show_metrics": execute("!cat results/paper/metrics.json"),
        "answer": print_answer(
            "results/paper/metrics.json", {"accuracy": "test_accuracy", "macro_f1": "test_macro_f1"}
        ),
    },
)

CHARLM = Expert(
    repo="charlm-ngram",
    query=query(
        "Train a character-level 3-gram language model with add-k smoothing (k = 0.1) on the toy "
        "corpus shipped with the repository, and evaluate it on the validation split.",
        "the validation perplexity and bits per character",
        '{"perplexity": 0.0, "bpc": 0.0}',
        [
            "Train on the first 200 documents of the training split only.",
            "Keep the other settings as they are (no lower-casing).",
        ],
        "charlm-ngram",
    ),
    answer={"perplexity": 2.2482, "bpc": 1.1687},
    landmarks=[
        r"Loaded 200 training and 60 validation documents",
        r"Fitted order-3 model \(k=0\.1\)",
        r"Validation: perplexity 2\.\d+ \| bpc 1\.\d+",
    ],
    cells={
        **clone("charlm-ngram"),
        "inspect_data": execute("!ls data\n!head -3 data/train.csv"),
        "convert": execute(
            """
# the loaders read JSON lines with a "text" field; the corpus is shipped as CSV (id,text)
import csv
import json

for split in ("train", "valid"):
    with open(f"data/{split}.csv", newline="", encoding="utf-8") as src, open(
        f"data/{split}.jsonl", "w", encoding="utf-8"
    ) as dst:
        for row in csv.DictReader(src):
            dst.write(json.dumps({"text": row["text"]}) + "\\n")
    print(split, sum(1 for _ in open(f"data/{split}.jsonl")), "documents converted")
"""
        ),
        "cpu": edit(
            "config.yaml",
            "device: cuda            # cuda | cpu\n",
            "device: cpu             # cuda | cpu\n",
        ),
        "hparams": edit(
            "config.yaml",
            "  order: 5              # n-gram order (context = order - 1 characters)\n"
            "  k: 0.5                # add-k smoothing constant\n",
            "  order: 3              # n-gram order (context = order - 1 characters)\n"
            "  k: 0.1                # add-k smoothing constant\n",
        ),
        "train": execute("!python train.py --config config.yaml --max_lines 200"),
        "answer": print_answer(
            "results/valid_metrics.json", {"perplexity": "perplexity", "bpc": "bpc"}
        ),
    },
)

TABULAR = Expert(
    repo="tabular-mlp",
    query=query(
        "Train the MLP classifier on the seed-variety data shipped with the repository and evaluate "
        "it on the test split.",
        "the test accuracy and the test macro-F1",
        '{"accuracy": 0.0, "macro_f1": 0.0}',
        [
            "Train for 5 epochs with a hidden layer of 16 units.",
            "Use only the first 300 rows of the training data.",
            "Keep the other hyperparameters of configs/default.ini.",
        ],
        "tabular-mlp",
    ),
    answer={"accuracy": 0.8, "macro_f1": 0.7981},
    landmarks=[
        r"train: 300 rows x 8 features \| test: 150 rows",
        r"epoch +5 \| train loss \d\.\d+ \| train acc",
        r"done after 5 epochs; evaluation saved to results/eval\.json",
    ],
    cells={
        **clone("tabular-mlp"),
        "show_config": execute("!cat configs/default.ini"),
        "rows": edit("configs/default.ini", "max_train_rows = -1\n", "max_train_rows = 300\n"),
        "hidden": edit("configs/default.ini", "hidden_size = 64\n", "hidden_size = 16\n"),
        "epochs": edit("configs/default.ini", "epochs = 200\n", "epochs = 5\n"),
        "first_run": execute("!python train.py --config configs/default.ini"),
        "fix": edit(
            "mlp/model.py",
            '            "b2": dlogits.sum(axis=1),\n',
            '            "b2": dlogits.sum(axis=0),\n',
        ),
        "train": execute("!python train.py --config configs/default.ini"),
        "answer": print_answer(
            "results/eval.json", {"accuracy": "test_accuracy", "macro_f1": "test_macro_f1"}
        ),
    },
)

HMM = Expert(
    repo="hmm-tagger",
    query=query(
        "Train the HMM part-of-speech tagger on the training treebank shipped with the repository "
        "and evaluate it on the test file.",
        "the overall tagging accuracy and the accuracy on unknown words",
        '{"accuracy": 0.0, "unknown_accuracy": 0.0}',
        [
            "Use add-lambda smoothing with lambda = 5.",
            "Keep the other hyperparameters of hparams.json.",
        ],
        "hmm-tagger",
    ),
    answer={"accuracy": 0.9726, "unknown_accuracy": 0.9355},
    landmarks=[
        r"Trained on 300 sentences: 8 tags, \d+ word types",
        r"Tagged 80 test sentences \(585 tokens",
        r"accuracy 0\.97\d+ \| known 0\.\d+ \| unknown 0\.93\d+",
        r"Saved predictions and scores to outputs/",
    ],
    cells={
        **clone("hmm-tagger"),
        "pin_numpy": execute(
            """
# hmm/model.py calls np.product, which NumPy 2 removed
!pip install "numpy<2"
"""
        ),
        "first_run": execute("!echo y | python tag.py --hparams hparams.json --smoothing 5"),
        "fix": edit(
            "tag.py",
            "    print(f\"accuracy {scores['acc']:.4f} | known {scores['known_acc']:.4f} | "
            "unknown {scores['unknown_acc']:.4f}\")\n",
            "    print(f\"accuracy {scores['accuracy']:.4f} | known {scores['known_accuracy']:.4f} | "
            "unknown {scores['unknown_accuracy']:.4f}\")\n",
        ),
        "tag": execute("!echo y | python tag.py --hparams hparams.json --smoothing 5"),
        "show_scores": execute("!cat outputs/scores.json"),
        "answer": print_answer(
            "outputs/scores.json", {"accuracy": "accuracy", "unknown_accuracy": "unknown_accuracy"}
        ),
    },
)

EXPERTS = {e.repo: e for e in (BOW, CHARLM, TABULAR, HMM)}

# ------------------------------------------------------------------------------ Masked tasks

MASKED = [
    Masked(
        "bow-sentiment",
        ["dependencies"],
        ["clone", "cd", "checkout", "install", "show_run"],
        "you should make sure the training script can run with the installed dependencies, then "
        "train with the hyperparameters of run.sh for 2 epochs and report the test metrics",
    ),
    Masked(
        "bow-sentiment",
        ["configuration"],
        ["clone", "cd", "checkout", "install", "pin_numpy"],
        "you should find the hyperparameters the paper's run script uses, train for 2 epochs with "
        "them and report the test metrics",
    ),
    Masked(
        "bow-sentiment",
        ["goal"],
        ["clone", "cd", "checkout", "install", "show_run", "pin_numpy", "train"],
        "you should read the test metrics of the training run that has already been done and "
        "report them",
    ),
    Masked(
        "charlm-ngram",
        ["cpu"],
        ["clone", "cd", "checkout", "install", "inspect_data", "convert", "hparams"],
        "you should make the code run on this machine, which has no GPU, and run the training and "
        "evaluation script train.py to get the validation metrics",
    ),
    Masked(
        "charlm-ngram",
        ["data"],
        ["clone", "cd", "checkout", "install", "cpu", "hparams"],
        "you should make the repository's data loading work with the corpus shipped in data/, and "
        "run train.py to get the validation metrics",
    ),
    Masked(
        "charlm-ngram",
        ["configuration", "cpu"],
        ["clone", "cd", "checkout", "install", "inspect_data", "convert"],
        "you should configure the model as the task asks and make sure the code runs on CPU, then "
        "run train.py to get the validation metrics",
    ),
    Masked(
        "tabular-mlp",
        ["issue"],
        [
            "clone",
            "cd",
            "checkout",
            "install",
            "show_config",
            "rows",
            "hidden",
            "epochs",
            "first_run",
        ],  # fmt: skip
        "you should fix the error raised by the training script, complete the training run and "
        "report the test metrics",
    ),
    Masked(
        "tabular-mlp",
        ["configuration"],
        ["clone", "cd", "checkout", "install", "fix"],
        "you should set the hyperparameters the task asks for, run train.py and report the test "
        "metrics",
        solution=["show_config", "rows", "hidden", "epochs", "train", "answer"],
    ),
    Masked(
        "tabular-mlp",
        ["goal"],
        ["clone", "cd", "checkout", "install", "show_config", "rows", "hidden", "epochs", "fix"],
        "you should run the training and evaluation and report the test metrics",
        solution=["train", "answer"],
    ),
    Masked(
        "hmm-tagger",
        ["dependencies"],
        ["clone", "cd", "checkout", "install", "fix"],
        "you should make the tagging script tag.py run (it fails with the installed packages) "
        "and report the test scores",
        solution=["pin_numpy", "tag", "show_scores", "answer"],
    ),
    Masked(
        "hmm-tagger",
        ["issue"],
        ["clone", "cd", "checkout", "install", "pin_numpy", "first_run"],
        "you should fix the error at the end of the tagging script, run it again and report the "
        "test scores",
    ),
    Masked(
        "hmm-tagger",
        ["other"],
        ["clone", "cd", "checkout", "install", "pin_numpy", "fix"],
        "you should run the tagging script tag.py with the requested smoothing and report the "
        "test scores",
        solution=["tag", "show_scores", "answer"],
    ),
]

MASKED_INTRO = "I have already executed some of the required steps. Now, "

# ------------------------------------------------------------------------------ Auto tasks

AUTO_INSTRUCTIONS = (
    "\n\nAdditional instructions:\n"
    "If any details are missing from the task description, you are allowed to make arbitrary "
    "assumptions and decisions.\n\n"
)

AUTO = [
    Auto(
        "charlm-ngram-benchmark",
        "charlm-ngram",
        "Measure the scoring throughput of a character-level n-gram language model on the toy "
        "corpus shipped with the repository, using the benchmark.py script with its default "
        "duration." + AUTO_INSTRUCTIONS + f"Git repository: {URL_PREFIX}charlm-ngram",
        "benchmark.py",
        [
            execute(f"!git clone {URL_PREFIX}charlm-ngram"),
            execute("%cd charlm-ngram"),
            execute("!pip install -r requirements.txt"),
            CHARLM.cells["convert"],
            execute("!sed -i 's/^device: cuda/device: cpu/' config.yaml\n!head -3 config.yaml"),
            execute("!python benchmark.py --config config.yaml"),
        ],
    ),
    Auto(
        "tabular-mlp-sweep",
        "tabular-mlp",
        "Run the compute-matched learning-rate sweep of the MLP classifier on the seed-variety "
        "dataset, using the sweep.py script with its default learning rates and time budget."
        + AUTO_INSTRUCTIONS
        + f"Git repository: {URL_PREFIX}tabular-mlp",
        "sweep.py",
        [
            execute(f"!git clone {URL_PREFIX}tabular-mlp"),
            execute("%cd tabular-mlp"),
            execute("!pip install -r requirements.txt"),
            execute(
                "# the bias gradient of the output layer is summed over the wrong axis\n"
                '!sed -i \'s/"b2": dlogits.sum(axis=1)/"b2": dlogits.sum(axis=0)/\' mlp/model.py\n'
                "!grep -n '\"b2\"' mlp/model.py"
            ),
            execute("!python sweep.py --config configs/default.ini"),
        ],
    ),
    Auto(
        "hmm-tagger-bootstrap",
        "hmm-tagger",
        "Compute a bootstrap confidence interval of the tagging accuracy of the HMM "
        "part-of-speech tagger on the treebank shipped with the repository, using the "
        "bootstrap.py script." + AUTO_INSTRUCTIONS + f"Git repository: {URL_PREFIX}hmm-tagger",
        "bootstrap.py",
        [
            execute(f"!git clone {URL_PREFIX}hmm-tagger"),
            execute("%cd hmm-tagger"),
            execute("!pip install -r requirements.txt"),
            execute('# np.product was removed in NumPy 2\n!pip install "numpy<2"'),
            execute("!python bootstrap.py --budget_seconds 12"),
        ],
    ),
]

# ------------------------------------------------------------------------------ writing


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def _fill(cell: dict, commit: str) -> dict:
    if "execute" in cell:
        return {"execute": cell["execute"].replace("{commit}", commit)}
    return cell


def _dump(data: dict) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def render(commits: dict[str, str]) -> dict[str, str]:
    """Every task file, as {relative path under tasks/: YAML text}."""
    files: dict[str, str] = {}
    for e in EXPERTS.values():
        commit = commits[e.repo]
        files[f"expert/{e.repo}.yaml"] = _dump(
            {
                "id": e.repo,
                "set": "expert",
                "repository": {"url": URL_PREFIX + e.repo, "commit": commit},
                "query": e.query,
                "answer": e.answer,
                "landmarks": e.landmarks,
                "solution": [_fill(c, commit) for c in e.cells.values()],
            }
        )
    for m in MASKED:
        e = EXPERTS[m.parent]
        commit = commits[e.repo]
        task_id = f"{m.parent}_{','.join(m.categories)}"
        unknown = [n for n in m.pre + (m.solution or []) if n not in e.cells]
        if unknown:
            raise KeyError(f"masked task {task_id} names cells {unknown} that {m.parent} lacks")
        solution = m.solution or [n for n in e.cells if n not in m.pre]
        files[f"masked/{task_id}.yaml"] = _dump(
            {
                "id": task_id,
                "set": "masked",
                "categories": m.categories,
                "repository": {"url": URL_PREFIX + e.repo, "commit": commit},
                "query": f"{e.query}\n\n{MASKED_INTRO}{m.goal}.",
                "answer": e.answer,
                "landmarks": e.landmarks,
                "pre_executed": [_fill(e.cells[n], commit) for n in m.pre],
                "solution": [_fill(e.cells[n], commit) for n in solution],
            }
        )
    for a in AUTO:
        files[f"auto/{a.id}.yaml"] = _dump(
            {
                "id": a.id,
                "set": "auto",
                "repository": {"url": URL_PREFIX + a.repo, "commit": commits[a.repo]},
                "query": a.query,
                "entrypoint": a.entrypoint,
                "solution": a.cells,
            }
        )
    return files


def head_commits() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        dest = build_mirrors(Path(tmp))
        return {name: commit_hashes(dest, name)[-1] for name in EXPERTS}


def main(argv: list[str]) -> int:
    files = render(head_commits())
    if "--check" in argv:
        stale = [
            p
            for p, text in files.items()
            if not (TASKS / p).is_file() or (TASKS / p).read_text() != text
        ]
        for p in stale:
            print(f"tasks/{p} is out of date: run python tasks/repos/make_demo_tasks.py")
        return 1 if stale else 0
    for rel, text in files.items():
        path = TASKS / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} task files under {TASKS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
