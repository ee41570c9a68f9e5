"""Task files: YAML loading and validation, SUPER's JSON lines, import to YAML and back."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from pytest_super.errors import TaskFileError
from pytest_super.tasks import (
    CATEGORIES,
    SETS,
    Cell,
    Limits,
    Task,
    categories_from_id,
    dump_task_yaml,
    import_jsonl,
    infer_set,
    iter_jsonl_tasks,
    load_yaml_task,
    schema,
    task_from_super_row,
    task_to_dict,
)

DATA = Path(__file__).parent / "data" / "tasks_module"
YAML_TASKS = DATA / "tasks"
SUPER_DATA = DATA / "super"

CLONE = "!git clone https://github.com/super-demo/vocab-stats"
CPU_EDIT = Cell(
    kind="edit",
    file="vocab-stats/config.yaml",
    before="device: cuda\n",
    after="device: cpu\n",
    context="# hardware\n",
)
SUPER_EDIT = "vocab-stats/config.yaml\n# hardware\n<<<BEFORE_EDIT>>>\ndevice: cuda\n<<<AFTER_EDIT>>>\ndevice: cpu\n"


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_jsonl(root: Path, name: str, rows: list) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    return write(root, name, "\n".join(lines) + "\n")


def super_row(**fields) -> dict:
    row = {
        "task_id": "demo",
        "github_repo": "https://github.com/super-demo/vocab-stats",
        "git_commit": "abc123",
        "query": "Train it and report the accuracy.",
        "query_components": {"e2e_task": "Train it"},
        "answer": '{"accuracy": 0.5}',
        "landmarks": ["Epoch 1/1"],
        "entrypoint": "",
        "pre_execute_cells": [],
        "solution": [],
    }
    row.update(fields)
    return row


# --------------------------------------------------------------------------- good YAML


def test_expert_yaml_loads_every_field() -> None:
    path = YAML_TASKS / "expert" / "vocab-stats.yaml"
    task = load_yaml_task(path)
    assert task == Task(
        id="vocab-stats",
        set="expert",
        query=(
            "Train the bag-of-words classifier of vocab-stats on the first 10 rows of its data "
            "for one epoch.\nReport the accuracy as a json structured as follows: "
            '{"accuracy": 0.0} (replace 0.0 with the actual value).\n\nAdditional instructions:\n'
            "1. Use the CPU.\n\nGit repository: https://github.com/super-demo/vocab-stats\n"
        ),
        repository="https://github.com/super-demo/vocab-stats",
        commit="1a2b3c4d",
        answer={"accuracy": 0.82},
        landmarks=("Epoch 1/1", r"loaded \d+ rows"),
        solution=(
            Cell(kind="execute", code=CLONE + "\n"),
            CPU_EDIT,
            Cell(kind="execute", code="%cd vocab-stats"),
            Cell(kind="execute", code="!python train.py --rows 10\n"),
        ),
        limits=Limits(compute_s=600, token_budget=400000, steps=100, cell_timeout_s=300),
        source=str(path),
        line=None,
    )


def test_masked_yaml_takes_set_from_directory_and_categories_from_id() -> None:
    task = load_yaml_task(YAML_TASKS / "masked" / "vocab-stats_configuration,cpu.yaml")
    assert task.set == "masked"
    assert task.categories == ("configuration", "cpu")
    assert task.answer == {"accuracy": 0.82}
    assert task.pre_executed == (
        Cell(kind="execute", code=CLONE + "\n"),
        Cell(kind="execute", code="%cd vocab-stats"),
    )


def test_masked_yaml_explicit_categories_win_over_the_id(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "masked/m_data.yaml",
        "id: m_data\nquery: q\nanswer: 1\ncategories: [goal, other]\n",
    )
    assert load_yaml_task(path).categories == ("goal", "other")


def test_auto_yaml_needs_no_answer() -> None:
    task = load_yaml_task(YAML_TASKS / "auto" / "vocab-stats-auto.yaml")
    assert (task.set, task.answer, task.entrypoint) == ("auto", None, "train.py")


def test_set_field_wins_over_directory(tmp_path: Path) -> None:
    path = write(tmp_path, "auto/x.yaml", "id: x\nset: expert\nquery: q\nanswer: [1, 2]\n")
    assert load_yaml_task(path).set == "expert"


# --------------------------------------------------------------------------- bad YAML

BAD_YAML = {
    # name: (relative path, text, field, value shown in the message, line, more expected words)
    "malformed": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: {accuracy: 0.5\nlandmarks: []\n",
        None,
        None,
        4,
        ["malformed YAML", "near 'landmarks: []'", "flow mapping that started on line 3"],
    ),
    "unknown-field": (
        "expert/t.yaml",
        "id: t\nquery: q\nanwser: 0.5\n",
        "anwser",
        "0.5",
        3,
        ["unknown field 'anwser'", "allowed: id, set, categories", "did you mean 'answer'"],
    ),
    "unknown-field-in-edit": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nsolution:\n  - edit: {file: a, before: b, after: c, ctx: d}\n",
        "solution[0].edit.ctx",
        "'d'",
        5,
        ["unknown field 'ctx'", "allowed: file, before, after, context"],
    ),
    "missing-query": (
        "expert/t.yaml",
        "id: t\nanswer: 0.5\n",
        "query",
        None,
        1,
        ["missing required field 'query'", "add `query:`"],
    ),
    "missing-answer-expert": (
        "expert/t.yaml",
        "id: t\nquery: q\n",
        "answer",
        None,
        None,
        ["expert tasks need a gold answer"],
    ),
    "null-answer-masked": (
        "masked/t_data.yaml",
        "id: t_data\nquery: q\nanswer:\n",
        "answer",
        "None",
        3,
        ["masked tasks need a gold answer"],
    ),
    "missing-entrypoint-auto": (
        "auto/t.yaml",
        "id: t\nquery: q\n",
        "entrypoint",
        None,
        None,
        ["auto tasks need an entrypoint"],
    ),
    "bad-landmark": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nlandmarks:\n  - 'ok'\n  - 'loss (\\d+'\n",
        "landmarks[1]",
        "'loss (\\\\d+'",
        6,
        ["landmark 1 is not a valid regular expression"],
    ),
    "bad-category": (
        "masked/t_data.yaml",
        "id: t_data\nquery: q\nanswer: 1\ncategories: [data, gpu]\n",
        "categories[1]",
        "'gpu'",
        4,
        ["must be one of dependencies, cpu, configuration"],
    ),
    "categories-outside-masked": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\ncategories: [data]\n",
        "categories",
        "['data']",
        4,
        ["only to masked tasks"],
    ),
    "cell-is-a-string": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nsolution:\n  - print(1)\n",
        "solution[0]",
        "'print(1)'",
        5,
        ["solution[0] must be a mapping, not a string", "execute: <code>"],
    ),
    "cell-with-two-keys": (
        "masked/t_data.yaml",
        "id: t_data\nquery: q\nanswer: 1\npre_executed:\n  - execute: a\n  - execute: b\n"
        "    edit: {file: f, before: x, after: y}\n",
        "pre_executed[1]",
        "'execute': 'b'",
        6,
        ["must have exactly one key, `execute` or `edit` (found: execute, edit)"],
    ),
    "cell-unknown-kind": (
        "masked/t_data.yaml",
        "id: t_data\nquery: q\nanswer: 1\npre_executed:\n  - run: ls\n",
        "pre_executed[0].run",
        "'ls'",
        5,
        ["unknown field 'run'", "allowed: execute, edit"],
    ),
    "edit-missing-after": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nsolution:\n  - edit:\n      file: a.py\n      before: x\n",
        "solution[0].edit.after",
        None,
        6,
        ["missing required field 'after' in solution[0].edit"],
    ),
    "bad-id": (
        "expert/t.yaml",
        "id: my task\nquery: q\nanswer: 1\n",
        "id",
        "'my task'",
        1,
        ["does not match", "letters, digits"],
    ),
    "limit-wrong-type": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nlimits:\n  steps: many\n",
        "limits.steps",
        "'many'",
        5,
        ["limits.steps must be an integer, not a string"],
    ),
    "commit-read-as-number": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nrepository: {url: u, commit: 1234567}\n",
        "repository.commit",
        "1234567",
        4,
        ["repository.commit must be a string, not an integer", "Quote the value"],
    ),
    "unknown-set": (
        "expert/t.yaml",
        "id: t\nset: expret\nquery: q\nanswer: 1\n",
        "set",
        "'expret'",
        2,
        ["must be one of expert, masked, auto"],
    ),
    "no-set": (
        "t.yaml",
        "id: t\nquery: q\nanswer: 1\n",
        "set",
        None,
        None,
        ["cannot tell which set", "tasks/<set>/", "`set:"],
    ),
    "duplicate-key": (
        "expert/t.yaml",
        "id: t\nquery: q\nanswer: 1\nquery: again\n",
        None,
        None,
        4,
        ["duplicate key 'query' (first on line 2)"],
    ),
    "not-a-mapping": (
        "expert/t.yaml",
        "- id: t\n",
        None,
        None,
        1,
        ["must be a YAML mapping", "not a list"],
    ),
    "empty-file": ("expert/t.yaml", "", None, None, None, ["not an empty file"]),
}


@pytest.mark.parametrize("case", list(BAD_YAML), ids=list(BAD_YAML))
def test_bad_yaml_names_file_field_value_and_line(tmp_path: Path, case: str) -> None:
    relative, text, field, value, line, words = BAD_YAML[case]
    path = write(tmp_path, relative, text)
    with pytest.raises(TaskFileError) as caught:
        load_yaml_task(path)
    error = caught.value
    message = str(error)
    assert message.startswith(str(path)), message
    assert error.field == field, message
    assert error.line == line, message
    if line is not None:
        assert f"{path}:{line}:" in message
    if field is not None:
        assert f"field {field!r}" in message
    if value is not None:
        assert value in message
    for word in words:
        assert word in message


def test_malformed_yaml_shows_the_offending_line(tmp_path: Path) -> None:
    path = write(tmp_path, "expert/t.yaml", "id: t\nquery: q\n  answer: : 1\n")
    with pytest.raises(TaskFileError) as caught:
        load_yaml_task(path)
    assert caught.value.line == 3
    assert "'answer: : 1'" in str(caught.value)


def test_missing_file_is_a_task_file_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="cannot read"):
        load_yaml_task(tmp_path / "expert" / "nope.yaml")


# --------------------------------------------------------------------------- schema


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(schema())


def test_schema_enums_match_the_constants() -> None:
    properties = schema()["properties"]
    assert tuple(properties["set"]["enum"]) == SETS
    assert tuple(properties["categories"]["items"]["enum"]) == CATEGORIES


def test_schema_documents_every_property_for_editors() -> None:
    undocumented = []

    def visit(node: dict, where: str) -> None:
        for name, sub in node.get("properties", {}).items():
            if "$ref" not in sub and not (sub.get("title") and sub.get("description")):
                undocumented.append(f"{where}.{name}")
            visit(sub, f"{where}.{name}")
        if isinstance(node.get("items"), dict):
            visit(node["items"], f"{where}[]")

    visit(schema(), "")
    for name, definition in schema()["$defs"].items():
        visit(definition, f"$defs.{name}")
    assert undocumented == []


# --------------------------------------------------------------------------- categories, sets


@pytest.mark.parametrize(
    ("task_id", "expected"),
    [
        ("amrbart_dependencies", ("dependencies",)),
        ("x_configuration,cpu", ("configuration", "cpu")),
        ("safety_bench_goal", ("goal",)),
        ("colbert_data,cpu,data", ("data", "cpu")),
        ("tiny_lm_nonsense", ("other",)),  # issue 9 item 11: an unknown suffix is "other"
        ("vocab-stats", ()),
        ("x_gpu,issue", ("other", "issue")),
        ("align-to-distill_customgoal", ("other",)),
        ("quantifying-stereotypes-in-language_custom", ("other",)),
        ("conv_graph_configuration,data", ("configuration", "data")),
        ("x_goal,dependencies", ("goal", "dependencies")),
    ],
)
def test_categories_from_id(task_id: str, expected: tuple[str, ...]) -> None:
    assert categories_from_id(task_id) == expected


@pytest.mark.parametrize(
    ("path", "explicit", "field", "expected"),
    [
        ("data/expert.jsonl", "auto", "masked", "auto"),  # the option beats everything
        ("data/expert.jsonl", None, "masked", "masked"),  # the field beats the file name
        ("data/expert.jsonl", None, None, "expert"),
        ("data/auto_gen.jsonl", None, None, "auto"),
        ("data/Masked/all_examples.jsonl", None, None, "masked"),
        ("tasks/masked/x.yaml", None, None, "masked"),
        ("tasks/masked/x.yaml", None, "expert", "expert"),
        ("tasks/auto_gen/x.yaml", "Expert", None, "expert"),
        ("tasks/expert.yaml", None, None, None),  # a YAML file's name is its id, not its set
        ("tasks/x.yaml", None, None, None),
        ("data/all.jsonl", None, None, None),
    ],
)
def test_infer_set_precedence(
    path: str, explicit: str | None, field: str | None, expected: str | None
) -> None:
    assert infer_set(Path(path), explicit, field) == expected


def test_infer_set_rejects_an_unknown_name() -> None:
    with pytest.raises(TaskFileError) as caught:
        infer_set(Path("data/expert.jsonl"), "experts")
    assert "--super-set" in str(caught.value) and "'experts'" in str(caught.value)


# --------------------------------------------------------------------------- SUPER's JSON lines


def test_super_expert_file_loads_with_set_from_file_name() -> None:
    path = SUPER_DATA / "expert.jsonl"
    first, second = iter_jsonl_tasks(path)
    assert isinstance(first, Task) and isinstance(second, Task)
    assert (first.id, first.set, first.line, first.source) == (
        "vocab-stats",
        "expert",
        1,
        str(path),
    )
    assert first.answer == {"accuracy": 0.82}
    assert first.repository == "https://github.com/super-demo/vocab-stats"
    assert first.commit == "1a2b3c4d"
    assert first.landmarks == ("Epoch 1/1", r"loaded \d+ rows")
    assert first.entrypoint is None  # "" in the data
    assert first.solution == (
        Cell(kind="execute", code=CLONE),
        Cell(kind="execute", code="%cd vocab-stats"),
        Cell(kind="execute", code="!python train.py --rows 10\n"),
    )
    assert second.answer == [12.5, 11.0]
    assert second.solution == (
        Cell(kind="execute", code=CLONE),
        CPU_EDIT,
        Cell(kind="execute", code="!python lm.py"),
    )


def test_super_masked_file_has_categories_and_pre_executed_edits() -> None:
    first, second = iter_jsonl_tasks(SUPER_DATA / "masked.jsonl")
    assert (first.set, first.categories) == ("masked", ("configuration", "cpu"))
    assert second.categories == ("data",)
    assert first.pre_executed == (
        Cell(kind="execute", code=CLONE),
        Cell(kind="execute", code="%cd vocab-stats"),
        CPU_EDIT,
    )


def test_super_auto_rows_need_no_answer_and_ignore_unknown_fields() -> None:
    first, second = iter_jsonl_tasks(SUPER_DATA / "auto_gen.jsonl")
    assert (first.set, first.answer, first.entrypoint, first.commit) == (
        "auto",
        None,
        "train.py",
        None,
    )
    assert second.answer is None and second.entrypoint == "lm.py"


@pytest.mark.parametrize(
    "solution",
    [
        pytest.param(["print(1)", "!ls\n"], id="code-strings"),
        pytest.param(
            [{"type": "execute", "content": "print(1)"}, {"type": "execute", "content": "!ls\n"}],
            id="typed-objects",
        ),
        pytest.param(
            [
                json.dumps({"type": "execute", "content": "print(1)"}),
                json.dumps({"type": "execute", "content": "!ls\n"}),
            ],
            id="typed-json-strings",
        ),
        pytest.param(
            [
                {"cell_type": "markdown", "source": "# Solve it"},
                {"cell_type": "code", "source": "print(1)"},
                {"cell_type": "code", "source": []},
                {"cell_type": "code", "source": ["!ls\n"]},
            ],
            id="notebook-cells",
        ),
        pytest.param(
            [json.dumps({"cell_type": "code", "source": ["print", "(1)"]}), "!ls\n"],
            id="notebook-json-strings-and-code",
        ),
        pytest.param(json.dumps(["print(1)", "!ls\n"]), id="json-string-of-list"),
        pytest.param(
            {
                "cells": [
                    {"cell_type": "code", "source": "print(1)"},
                    {"cell_type": "code", "source": "!ls\n"},
                ]
            },
            id="notebook",
        ),
    ],
)
def test_super_solution_shapes(solution) -> None:
    task = task_from_super_row(
        super_row(solution=solution), path="expert.jsonl", line=1, set_name=None
    )
    assert task.solution == (
        Cell(kind="execute", code="print(1)"),
        Cell(kind="execute", code="!ls\n"),
    )


def test_super_solution_edit_cell() -> None:
    row = super_row(solution=[json.dumps({"type": "edit", "content": SUPER_EDIT})])
    task = task_from_super_row(row, path="expert.jsonl", line=1, set_name=None)
    assert task.solution == (CPU_EDIT,)


def test_answer_not_json_is_an_error_of_its_line_only(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        "expert.jsonl",
        [
            super_row(task_id="a"),
            "",
            super_row(task_id="b", answer="accuracy: 0.5"),
            super_row(task_id="c"),
        ],
    )
    items = list(iter_jsonl_tasks(path))
    assert [getattr(item, "id", None) for item in items] == ["a", None, "c"]
    error = items[1]
    assert isinstance(error, TaskFileError)
    assert (error.line, error.field, error.value) == (3, "answer", "accuracy: 0.5")
    message = str(error)
    assert f"{path}:3:" in message
    assert "answer is not valid JSON" in message
    assert "field 'answer' = 'accuracy: 0.5'" in message


def test_duplicate_task_id_is_an_error_of_the_later_line(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path, "masked.jsonl", [super_row(task_id="x_data"), super_row(task_id="x_data")]
    )
    first, second = iter_jsonl_tasks(path)
    assert isinstance(first, Task)
    assert isinstance(second, TaskFileError)
    assert second.line == 2
    assert "duplicate task id (first on line 1)" in str(second)
    assert "field 'task_id' = 'x_data'" in str(second)


BAD_ROWS = {
    # name: (line text or row, field, words in the message)
    "not-json": ('{"task_id": "a", ', None, ["not a JSON object"]),
    "not-an-object": ("[1, 2]", None, ["must hold a JSON object"]),
    "missing-task-id": (super_row(task_id=None), "task_id", ["missing task_id"]),
    "bad-task-id": (super_row(task_id="a b"), "task_id", ["'a b'", "letters, digits"]),
    "missing-query": ({"task_id": "a", "answer": "1"}, "query", ["missing query"]),
    "missing-answer": (super_row(answer=""), "answer", ["expert tasks need a gold answer"]),
    "bad-landmark": (super_row(landmarks=["ok", "(x"]), "landmarks[1]", ["landmark 1", "'(x'"]),
    "landmarks-not-a-list": (super_row(landmarks="Epoch"), "landmarks", ["list of strings"]),
    "pre-executed-not-json": (
        super_row(pre_execute_cells=["{not json"]),
        "pre_execute_cells[0]",
        ["not a JSON object", "'{not json'"],
    ),
    "unknown-cell-type": (
        super_row(pre_execute_cells=[json.dumps({"type": "shell", "content": "ls"})]),
        "pre_execute_cells[0].type",
        ["unknown cell type", "'shell'"],
    ),
    "malformed-edit": (
        super_row(pre_execute_cells=[json.dumps({"type": "edit", "content": "a.py\nno markers"})]),
        "pre_execute_cells[0].content",
        ["not a valid SUPER edit", "'a.py\\nno markers'"],
    ),
    "solution-item-not-a-cell": (super_row(solution=[42]), "solution[0]", ["is not a cell", "42"]),
    "unknown-set-field": (super_row(set="hard"), "set", ["unknown set", "'hard'"]),
    # checked by task.schema.json on the converted row, named as SUPER names them
    "github-repo-not-text": (
        super_row(github_repo=5),
        "github_repo",
        ["github_repo must be a string, not an integer"],
    ),
    "empty-landmark": (super_row(landmarks=["ok", ""]), "landmarks[1]", ["must not be empty"]),
}


@pytest.mark.parametrize("case", list(BAD_ROWS), ids=list(BAD_ROWS))
def test_bad_super_rows(tmp_path: Path, case: str) -> None:
    row, field, words = BAD_ROWS[case]
    path = write_jsonl(tmp_path, "expert.jsonl", [super_row(task_id="good"), row])
    good, error = iter_jsonl_tasks(path)
    assert isinstance(good, Task)
    assert isinstance(error, TaskFileError), error
    assert (error.line, error.field) == (2, field)
    message = str(error)
    assert f"{path}:2:" in message
    if field is not None:
        assert f"field {field!r}" in message
    for word in words:
        assert word in message


def test_super_set_comes_from_option_then_row_then_file_name(tmp_path: Path) -> None:
    rows = [
        super_row(task_id="a", entrypoint="train.py"),
        super_row(task_id="b_cpu", set="masked", entrypoint="train.py"),
    ]
    named = write_jsonl(tmp_path, "expert.jsonl", rows)
    assert [task.set for task in iter_jsonl_tasks(named)] == ["expert", "masked"]
    assert [task.set for task in iter_jsonl_tasks(named, "auto")] == ["auto", "auto"]
    anonymous = write_jsonl(tmp_path, "rows.jsonl", rows)
    error, task = iter_jsonl_tasks(anonymous)
    assert isinstance(error, TaskFileError) and "--super-set" in str(error)
    assert (task.set, task.categories) == ("masked", ("cpu",))


def test_super_auto_row_without_entrypoint_is_an_error() -> None:
    with pytest.raises(TaskFileError) as caught:
        task_from_super_row(super_row(answer=""), path="x.jsonl", line=7, set_name="auto")
    assert caught.value.line == 7 and caught.value.field == "entrypoint"


# --------------------------------------------------------------------------- YAML out and back


@pytest.mark.parametrize("name", ["expert.jsonl", "masked.jsonl", "auto_gen.jsonl"])
def test_import_round_trip(tmp_path: Path, name: str) -> None:
    source = SUPER_DATA / name
    written = import_jsonl(source, None, tmp_path / "out")
    rows = list(iter_jsonl_tasks(source))
    assert [path.name for path in written] == [f"{task.id}.yaml" for task in rows]
    for path, expected in zip(written, rows, strict=True):
        loaded = load_yaml_task(path)
        assert loaded == replace(expected, source=str(path), line=None)
        assert loaded.source == str(path)


def test_imported_yaml_is_readable(tmp_path: Path) -> None:
    (path,) = import_jsonl(SUPER_DATA / "masked.jsonl", None, tmp_path)[:1]
    text = path.read_text()
    assert text.startswith("# Imported by pytest-super from masked.jsonl, line 1.\n")
    assert "\nquery: |" in text  # multi-line strings as block scalars
    assert "\n  - edit:\n      file: vocab-stats/config.yaml\n" in text
    assert list(yaml.safe_load(text)) == [
        "id",
        "set",
        "categories",
        "repository",
        "query",
        "answer",
        "landmarks",
        "pre_executed",
        "solution",
        "image",  # SUPER's rows run in its reference environment (colab), also once imported
    ]


def test_import_with_bad_lines_lists_them_and_writes_nothing(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        "expert.jsonl",
        [super_row(task_id="a"), super_row(task_id="b", answer="{oops"), super_row(task_id="a")],
    )
    out = tmp_path / "out"
    with pytest.raises(TaskFileError) as caught:
        import_jsonl(path, None, out)
    message = str(caught.value)
    assert "2 bad line(s) (2, 3)" in message
    assert f"{path}:2:" in message and "'{oops'" in message
    assert f"{path}:3:" in message and "duplicate task id" in message
    assert not out.exists()


@pytest.mark.parametrize("path", sorted(YAML_TASKS.glob("*/*.yaml")), ids=lambda p: p.name)
def test_yaml_dump_round_trip(tmp_path: Path, path: Path) -> None:
    task = load_yaml_task(path)
    again = write(tmp_path, f"{task.set}/{task.id}.yaml", dump_task_yaml(task))
    assert load_yaml_task(again) == replace(task, source=str(again))


def test_awkward_strings_survive_the_round_trip(tmp_path: Path) -> None:
    code = "x = 1   \n\tif x:\n  print('a: b')  \n"  # trailing spaces, a tab, a leading space
    task = Task(
        id="odd",
        set="masked",
        query="  leading spaces\nand a trailing newline\n\n",
        categories=(),
        answer={"yes": "no", "n": "0.10", "list": [1, "2", None]},
        pre_executed=(
            Cell(kind="execute", code=code),
            Cell(kind="edit", file="f", before="", after="x\n"),
        ),
        limits=Limits(steps=5),
    )
    path = write(tmp_path, "masked/odd.yaml", dump_task_yaml(task))
    assert load_yaml_task(path) == replace(task, source=str(path))


def test_task_to_dict_omits_empty_and_default_fields() -> None:
    task = Task(id="m_data", set="masked", query="q", categories=("data",), answer=0)
    assert task_to_dict(task) == {
        "id": "m_data",
        "set": "masked",
        "categories": ["data"],
        "query": "q",
        "answer": 0,
    }
    # categories that differ from the id's default are kept, even when empty
    assert task_to_dict(replace(task, categories=()))["categories"] == []


# -- a folder named on the command line (issue 29, cause 11) ---------------------------------------
NAMED_TASK = """\
id: {id}
set: expert
query: 'Report x as a json structured as follows: {{"x": 0}}.'
answer: {{x: 1}}
"""


@pytest.fixture
def outside_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project whose task folder is `tasks`, with task files in `some/folder` outside it."""
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    write(pytester.path, "tasks/expert/inside.yaml", NAMED_TASK.format(id="inside"))
    write(pytester.path, "some/folder/outside.yaml", NAMED_TASK.format(id="outside"))
    write(
        pytester.path,
        "some/folder/deeper/rows.jsonl",
        json.dumps(super_row(task_id="row", set="expert")),
    )
    return pytester


@pytest.mark.parametrize("selection", ["--super-agent=gold", "--super-set=expert"])
def test_a_folder_named_on_the_command_line_is_searched_for_task_files(outside_project, selection):
    """Red on eb4ffc2: `pytest some/folder --super-agent=gold` said only "no tests collected"."""
    result = outside_project.runpytest_subprocess("some/folder", selection, "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["some/folder/deeper/rows.jsonl::row", "some/folder/outside.yaml::outside", "*2 tests*"]
    )
    assert "inside" not in result.stdout.str()


def test_the_implicit_walk_keeps_to_the_task_folders(outside_project):
    """Without paths (and with `.`, the project itself) only super_tasks holds task files."""
    for args in ([], ["."]):
        result = outside_project.runpytest_subprocess(
            *args, "--super-agent=gold", "--collect-only", "-q"
        )
        result.stdout.fnmatch_lines(["tasks/expert/inside.yaml::inside", "*1 test*"])
        assert "outside" not in result.stdout.str()


def test_a_named_folder_without_an_agent_says_why_its_task_files_are_not_collected(
    outside_project,
):
    """Red on eb4ffc2: "no tests collected" and nothing else."""
    result = outside_project.runpytest_subprocess("some/folder", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*some/folder: task files (such as *) are not collected*--super-agent*super_tasks*"]
    )


def test_a_named_folder_of_the_test_suite_is_left_out_without_a_warning(outside_project):
    """A folder of the ini's testpaths holds a test suite's own task data: no warning for it."""
    outside_project.makeini("[pytest]\nsuper_tasks = tasks\ntestpaths = some/folder\n")
    result = outside_project.runpytest_subprocess("some/folder", "--collect-only", "-q")
    assert "not collected" not in result.stdout.str()
    assert "outside.yaml" not in result.stdout.str()
