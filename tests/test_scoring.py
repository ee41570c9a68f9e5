"""Pins SUPER's scores as this project computes them (the intended semantics, not the reference's)."""

from __future__ import annotations

import math
import pickle
import re
import warnings

import pytest

from pytest_super import scoring
from pytest_super.scoring import (
    DEFAULT_TOLERANCE,
    MISSING,
    Comparison,
    ExecutedCell,
    compare_answer,
    missed_landmarks,
    parse_submission,
    score_accuracy,
    score_landmarks,
    score_script_executed,
)
from pytest_super.trajectory import Step

# --- accuracy: leaves ---------------------------------------------------------------------------


def test_default_tolerance_is_supers():
    assert DEFAULT_TOLERANCE == 0.01


@pytest.mark.parametrize(
    ("gold", "submitted", "expected"),
    [
        (0.82, 0.82, 1.0),
        (0.82, 0.825, 1.0),
        (0.82, 0.815, 1.0),
        (0.82, 0.83, 0.0),  # |diff| = 0.01 (within float error): not < tolerance
        (0.5, 0.51, 0.0),  # the boundary: 0.01 exactly is a miss
        (0.5, 0.4901, 1.0),
        (3, 3.0, 1.0),  # ints and floats compare as numbers
        (3.0, 3, 1.0),
        (3, 3.009, 1.0),
        (3, 4, 0.0),
        (-1.25, -1.2501, 1.0),
    ],
)
def test_numbers_match_within_strict_absolute_tolerance(gold, submitted, expected):
    assert score_accuracy(gold, submitted) == expected


def test_boundary_is_strict_even_where_floats_are_exact():
    # 0.25 and 0.5 are exact in binary, so the difference is exactly the tolerance
    assert score_accuracy(0.5, 0.75, tolerance=0.25) == 0.0
    assert score_accuracy(0.5, 0.7499, tolerance=0.25) == 1.0


def test_custom_tolerance():
    assert score_accuracy(0.5, 0.55) == 0.0
    assert score_accuracy(0.5, 0.55, tolerance=0.1) == 1.0
    assert score_accuracy({"a": [0.5, {"b": 10}]}, {"a": [0.55, {"b": 10.5}]}, tolerance=1) == 1.0
    assert score_accuracy(10, 10.0001, tolerance=0.0) == 0.0


@pytest.mark.parametrize(
    ("gold", "submitted", "expected"),
    [
        (True, True, 1.0),
        (False, False, 1.0),
        (True, False, 0.0),
        (True, 1, 0.0),  # True is not 1
        (1, True, 0.0),
        (False, 0, 0.0),
        (0, False, 0.0),
        (1.0, True, 0.0),
        ("True", True, 0.0),
    ],
)
def test_booleans_only_equal_booleans(gold, submitted, expected):
    assert score_accuracy(gold, submitted) == expected


@pytest.mark.parametrize(
    ("gold", "submitted", "expected"),
    [
        ("positive", "positive", 1.0),
        ("positive", "  positive\n", 1.0),
        (" positive ", "positive", 1.0),
        ("positive", "Positive", 0.0),
        ("a b", "a  b", 0.0),  # only the ends are stripped
        ("0.5", 0.5, 0.0),  # type mismatch
        (0.5, "0.5", 0.0),
        ("", "   ", 1.0),
    ],
)
def test_strings_match_exactly_after_strip(gold, submitted, expected):
    assert score_accuracy(gold, submitted) == expected


def test_nan_never_matches():
    nan = float("nan")
    assert score_accuracy(nan, nan) == 0.0
    assert score_accuracy(0.5, nan) == 0.0
    assert score_accuracy(nan, 0.5) == 0.0
    assert score_accuracy({"f1": 0.5}, {"f1": nan}) == 0.0
    assert score_accuracy(0.5, math.inf) == 0.0


def test_none_matches_none_inside_an_answer():
    assert score_accuracy({"a": None, "b": 1}, {"a": None, "b": 1}) == 1.0
    assert score_accuracy({"a": None, "b": 1}, {"a": 0, "b": 1}) == 0.5
    assert score_accuracy({"a": 1}, {"a": None}) == 0.0


@pytest.mark.parametrize("submission", [None, MISSING, {}, []])
def test_no_submission_scores_zero_without_crashing(submission):
    # the reference crashed on None ("'NoneType' has no attribute get") and on empty answers
    assert score_accuracy({"accuracy": 0.8, "f1": 0.7}, submission) == 0.0
    assert score_accuracy([0.1, 0.2], submission) == 0.0
    assert score_accuracy(0.5, submission) == 0.0


# --- accuracy: containers (the reference's bugs) ------------------------------------------------


def test_dict_is_the_mean_over_gold_keys():
    gold = {"accuracy": 0.8, "f1": 0.7, "loss": 1.5, "name": "bert"}
    assert score_accuracy(gold, {"accuracy": 0.8, "f1": 0.7, "loss": 1.5, "name": "bert"}) == 1.0
    assert score_accuracy(gold, {"accuracy": 0.8, "f1": 0.0, "loss": 1.5, "name": "bert"}) == 0.75


def test_missing_gold_key_scores_zero():
    # the reference iterated the submission's keys, so a missing gold key was ignored (1.0)
    assert score_accuracy({"accuracy": 0.8, "f1": 0.7}, {"accuracy": 0.8}) == 0.5


def test_extra_submitted_keys_are_ignored():
    # the reference judged every submitted key against gold, punishing extras (0.5)
    assert score_accuracy({"accuracy": 0.8}, {"accuracy": 0.8, "f1": 0.7}) == 1.0


def test_list_is_the_mean_over_gold_positions():
    assert score_accuracy([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.9]) == 0.75


def test_short_list_is_not_full_marks():
    # the reference zipped the lists, so a short submission scored as if it were complete
    assert score_accuracy([0.1, 0.2, 0.3, 0.4], [0.1, 0.2]) == 0.5


def test_extra_list_positions_are_ignored():
    assert score_accuracy([0.1, 0.2], [0.1, 0.2, 0.3]) == 1.0


def test_tolerance_applies_inside_lists():
    # the reference dropped the tolerance inside lists (it compared with its default)
    assert score_accuracy([0.5, 0.7], [0.55, 0.75], tolerance=0.1) == 1.0
    assert score_accuracy([0.5, 0.7], [0.505, 0.7]) == 1.0


def test_tolerance_applies_inside_nested_dicts():
    gold = {"eval": {"accuracy": 0.5, "per_class": [{"f1": 0.2}, {"f1": 0.3}]}}
    sub = {"eval": {"accuracy": 0.59, "per_class": [{"f1": 0.29}, {"f1": 0.21}]}}
    assert score_accuracy(gold, sub, tolerance=0.1) == 1.0
    assert score_accuracy(gold, sub) == 0.0


def test_nesting_averages_at_every_level():
    gold = {"a": [1, 2], "b": {"c": 1, "d": 2, "e": 3, "f": 4}}
    sub = {"a": [1, 0], "b": {"c": 1, "d": 2, "e": 3, "f": 0}}
    # a: 1/2, b: 3/4 -> (0.5 + 0.75) / 2
    assert score_accuracy(gold, sub) == pytest.approx(0.625)


@pytest.mark.parametrize(
    ("gold", "submitted"),
    [
        ({"a": 1}, [1]),
        ([1], {"0": 1}),
        ({"a": 1}, 1),
        ([1, 2], "1, 2"),
        ({"a": {"b": 1}}, {"a": 1}),
        ({"a": [1]}, {"a": 1}),
    ],
)
def test_type_mismatch_scores_zero(gold, submitted):
    assert score_accuracy(gold, submitted) == 0.0


def test_empty_gold_containers_need_an_equal_submission():
    assert score_accuracy({}, {}) == 1.0
    assert score_accuracy([], []) == 1.0
    assert score_accuracy({}, {"a": 1}) == 0.0
    assert score_accuracy([], [1]) == 0.0
    assert score_accuracy({"a": []}, {"a": []}) == 1.0
    assert score_accuracy({"a": []}, {"a": [0]}) == 0.0
    assert score_accuracy({"a": {}}, {"a": []}) == 0.0


def test_yaml_integer_keys_find_json_string_keys():
    assert score_accuracy({1: 0.5, 2: 0.6}, {"1": 0.5, "2": 0.6}) == 1.0


def test_tuples_count_as_lists():
    assert score_accuracy((1, 2), [1, 2]) == 1.0


# --- compare_answer -----------------------------------------------------------------------------


def test_compare_answer_gives_one_row_per_gold_leaf_in_gold_order():
    gold = {"accuracy": 0.8, "results": [{"f1": 0.5}, {"f1": 0.6, "name": "x"}], "loss": 1.0}
    sub = {"loss": 2.0, "results": [{"f1": 0.501}, {"f1": 0.9, "name": " x "}], "accuracy": 0.8}
    assert compare_answer(gold, sub) == [
        Comparison("accuracy", 0.8, 0.8, 1.0),
        Comparison("results[0].f1", 0.5, 0.501, 1.0),
        Comparison("results[1].f1", 0.6, 0.9, 0.0),
        Comparison("results[1].name", "x", " x ", 1.0),
        Comparison("loss", 1.0, 2.0, 0.0),
    ]


def test_compare_answer_scalar_has_empty_path():
    assert compare_answer(0.5, 0.5) == [Comparison("", 0.5, 0.5, 1.0)]
    assert compare_answer(0.5, 0.7) == [Comparison("", 0.5, 0.7, 0.0)]


def test_compare_answer_missing_subtree_is_one_row():
    gold = {"a": 1, "b": {"c": 1, "d": 2}}
    assert compare_answer(gold, {"a": 1}) == [
        Comparison("a", 1, 1, 1.0),
        Comparison("b", {"c": 1, "d": 2}, MISSING, 0.0),
    ]


def test_compare_answer_missing_list_positions_and_type_mismatch():
    assert compare_answer([1, [2, 3], 4], [1, "x"]) == [
        Comparison("[0]", 1, 1, 1.0),
        Comparison("[1]", [2, 3], "x", 0.0),
        Comparison("[2]", 4, MISSING, 0.0),
    ]


def test_compare_answer_no_submission():
    assert compare_answer({"a": 1}, None) == [Comparison("", {"a": 1}, MISSING, 0.0)]


def test_compare_answer_quotes_keys_that_are_not_plain_names():
    rows = compare_answer({"eval accuracy": 1, "x": {"a.b": 2}}, {"eval accuracy": 1})
    assert [r.path for r in rows] == ['["eval accuracy"]', "x"]
    rows = compare_answer({"x": {"a.b": 2}}, {"x": {"a.b": 2}})
    assert [r.path for r in rows] == ['x["a.b"]']


def test_compare_answer_empty_gold_container_is_one_row():
    assert compare_answer({"a": []}, {"a": []}) == [Comparison("a", [], [], 1.0)]


def test_missing_sentinel():
    assert repr(MISSING) == "<missing>"
    assert pickle.loads(pickle.dumps(MISSING)) is MISSING


# --- parse_submission ---------------------------------------------------------------------------


def test_parse_submission_reads_json():
    assert parse_submission('{"accuracy": 0.5, "f1": [1, 2]}') == {"accuracy": 0.5, "f1": [1, 2]}
    assert parse_submission(" 0.5 ") == 0.5


@pytest.mark.parametrize("text", ["", "{accuracy: 0.5}", "{'a': 1}", '{"a": 1', "0.5 0.6"])
def test_parse_submission_rejects_invalid_json_readably(text):
    with pytest.raises(ValueError, match=r"^submission is not valid JSON: .+ line 1 column \d+"):
        parse_submission(text)


# --- landmarks ----------------------------------------------------------------------------------


def test_landmarks_score_is_hits_over_count():
    landmarks = ["Epoch 1/1", r"accuracy: \d+\.\d+", "Saved model"]
    outputs = ["Loading...\nEpoch 1/1 done", "eval accuracy: 0.75"]
    assert score_landmarks(landmarks, outputs) == pytest.approx(2 / 3)
    assert missed_landmarks(landmarks, outputs) == ["Saved model"]


def test_landmarks_see_newlines_as_spaces():
    outputs = ["Training finished\nTest accuracy = 0.5"]
    assert score_landmarks([r"finished Test accuracy"], outputs) == 1.0
    assert score_landmarks([r"finished\nTest"], outputs) == 0.0


def test_landmarks_are_searched_in_each_output_separately():
    # a match across two cells' outputs does not count
    assert score_landmarks(["alpha beta"], ["alpha", "beta"]) == 0.0


def test_landmarks_count_pre_executed_outputs_and_accept_a_generator():
    pre_executed = ["Cloning into 'repo'...", "Successfully installed transformers-4.40.2"]
    agent = ["Epoch 1 loss 0.3"]
    landmarks = ["Successfully installed", r"Epoch 1 loss"]
    assert score_landmarks(landmarks, (o for o in pre_executed + agent)) == 1.0
    assert missed_landmarks(landmarks, iter(pre_executed)) == [r"Epoch 1 loss"]


def test_no_landmarks_is_none():
    assert score_landmarks([], ["anything"]) is None
    assert missed_landmarks([], ["anything"]) == []


def test_landmarks_with_no_outputs_score_zero():
    assert score_landmarks(["x"], []) == 0.0


def test_invalid_landmark_regex_raises():
    with pytest.raises(re.error):
        score_landmarks(["(unclosed"], ["text"])


# --- script executed ----------------------------------------------------------------------------


def cell(code: str, output: str = "done", duration_s: float = 12.0) -> ExecutedCell:
    return ExecutedCell(code=code, output=output, duration_s=duration_s)


def test_script_executed_by_file_name():
    assert score_script_executed("src/train.py", [cell("!python src/train.py --epochs 1")]) == 1.0
    assert score_script_executed("src/train.py", [cell("%cd src\n!python train.py")]) == 1.0
    assert score_script_executed("run.sh", [cell("!bash run.sh")]) == 1.0
    assert score_script_executed("scripts/run.bash", [cell("!bash scripts/run.bash")]) == 1.0


def test_script_executed_by_module_path():
    assert score_script_executed("src/train.py", [cell("!python -m src.train --epochs 1")]) == 1.0
    assert score_script_executed("src/train.py", [cell("!cd src && python3 -m train")]) == 1.0
    assert score_script_executed("src/train.py", [cell("!python -m src.trainer")]) == 0.0
    # a module path without `python -m` is not a run
    assert score_script_executed("src/train.py", [cell("import src.train")]) == 0.0


def test_script_executed_ignores_other_scripts():
    assert score_script_executed("train.py", [cell("!python pretrain.py")]) == 0.0
    assert score_script_executed("train.py", [cell("!python eval.py")]) == 0.0


def test_script_executed_needs_ten_seconds():
    assert score_script_executed("train.py", [cell("!python train.py", duration_s=9.99)]) == 0.0
    assert score_script_executed("train.py", [cell("!python train.py", duration_s=10.0)]) == 1.0


def test_script_executed_rejects_traceback_and_argparse_errors():
    traceback = "Traceback (most recent call last):\n  File ...\nValueError: bad"
    argparse = (
        "usage: train.py [-h] --data DATA\ntrain.py: error: the following arguments are required"
    )
    assert score_script_executed("train.py", [cell("!python train.py", traceback)]) == 0.0
    assert score_script_executed("src/train.py", [cell("!python src/train.py", argparse)]) == 0.0


def test_script_executed_needs_one_good_cell_among_many():
    cells = [
        cell("!python train.py", "train.py: error: unrecognized arguments"),
        cell("!ls", duration_s=30),
        cell("!python train.py --ok", "Epoch 1 done", duration_s=40),
    ]
    assert score_script_executed("train.py", cells) == 1.0
    assert score_script_executed("train.py", cells[:2]) == 0.0
    assert score_script_executed("train.py", []) == 0.0


@pytest.mark.parametrize("entrypoint", [None, "", "config.yaml", "train.ipynb", "Makefile"])
def test_script_executed_is_none_without_a_script_entrypoint(entrypoint):
    assert score_script_executed(entrypoint, [cell(f"!python {entrypoint}")]) is None


def test_the_landmark_time_bound_is_per_regex_and_a_sane_regex_still_matches_late():
    texts = ["x" * 1_000_000, "epoch 3 loss 0.25"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a sane regex never warns
        assert scoring.score_landmarks([r"loss \d+\.\d+", r"^x+$"], texts, timeout_s=5) == 1.0


@pytest.mark.parametrize(
    ("text", "submitted"),
    [
        ("null", False),
        ("{}", False),
        ("[]", False),
        ('""', False),
        ("0", False),
        ("false", False),
        ('{"acc": 0}', True),
        ("[0]", True),
        ('"text"', True),
        ("0.5", True),
    ],
)
def test_submitted_is_a_non_empty_submission_as_the_reference_decides(text, submitted):
    """The reference: `if last_action["content"]` on the parsed JSON (issue 9, item 2)."""
    assert scoring.is_submitted(parse_submission(text)) is submitted


def test_observed_texts_are_raw_cell_output_and_every_other_steps_observation():
    steps = [
        Step("", "execute", "print(1)", observation="1 (cleaned)", output="1\n", code="print(1)"),
        Step("", "execute", "pass", observation="[no output]", output="", code="pass"),
        Step("", "edit", "f\n...", observation="Edit was successful. ..."),
        Step("", "open", "open f.py", observation="[File: /f.py (3 lines total)]"),
        Step("", "continue_wait", "", observation="done (cleaned)", output="done\n"),
    ]
    assert scoring.observed_texts(steps) == [
        "1\n",
        "",
        "Edit was successful. ...",
        "[File: /f.py (3 lines total)]",
        "done\n",
    ]


def test_unmatchable_leaves_name_nan_and_infinity():
    gold = {"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": -float("inf")}, "e": 1e308}
    assert scoring.unmatchable_leaves(gold) == ["a", "b[1]", "c.d"]
    assert scoring.unmatchable_leaves(0.5) == []


# --- any submitted value scores without raising (issue 29 cause 10) ------------------------------

HUGE = 10**400  # a 401-digit integer: no float holds it


def deep_list(depth: int) -> list:
    """A list nested `depth` deep, built without recursion."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("gold", "submitted", "expected"),
    [
        (0.5, HUGE, 0.0),  # int - float overflowed
        (HUGE, 0.5, 0.0),
        (HUGE, HUGE, 1.0),  # ints subtract exactly
        (HUGE, HUGE + 1, 0.0),
        (HUGE, float("inf"), 0.0),
        (float("inf"), HUGE, 0.0),
        (-HUGE, -0.0, 0.0),
        ({"a": 0.5, "b": 1}, {"a": HUGE, "b": 1}, 0.5),
        ([0.5, 2], [-HUGE, 2], 0.5),
        (1.0, float("-inf"), 0.0),
        (float("inf"), float("inf"), 0.0),  # infinity never matches, as NaN
    ],
    ids=lambda value: repr(value)[:20],
)
def test_numbers_of_any_size_score_without_raising(gold, submitted, expected):
    assert score_accuracy(gold, submitted) == expected
    assert sum(c.score for c in compare_answer(gold, submitted)) >= 0  # never raises


def test_a_huge_integer_gold_is_finite_not_unmatchable():
    assert scoring.unmatchable_leaves({"n": HUGE, "m": -HUGE}) == []


@pytest.mark.parametrize(
    "submitted",
    [
        deep_list(100_000),
        {"a": deep_list(100_000)},
        b"0.5",
        bytearray(b"x"),
        "\udc80",  # a lone surrogate (bytes that were not UTF-8)
        {1: 0.5, (2, 3): 1, None: "x"},  # keys JSON cannot have
        {"a": {"b": [float("nan"), HUGE, b"x"]}},
        object(),
        {0.5},
    ],
)
def test_any_value_shape_scores_without_raising(submitted):
    for gold in (0.5, "x", {"a": {"b": [1, 2, 3]}}, [[1]], {"1": 0.5}, None, True):
        assert 0.0 <= score_accuracy(gold, submitted) <= 1.0
        assert compare_answer(gold, submitted)
    assert scoring.is_submitted(submitted) in (True, False)


@pytest.mark.parametrize("depth", [5_000, 100_000, 101, 900])  # the bound is 100
def test_a_submission_nested_too_deep_is_read_and_scores_zero(depth):
    text = "[" * depth + "]" * depth
    read = scoring.read_submission(text)
    assert (read.value, read.submitted) == (None, True)
    assert f"more than {scoring.MAX_SUBMISSION_DEPTH} levels deep" in read.problem
    with pytest.raises(ValueError, match="levels deep"):
        parse_submission('{"a": ' + text + "}")


def test_a_submission_at_the_depth_bound_is_scored():
    depth = scoring.MAX_SUBMISSION_DEPTH
    value = parse_submission('{"a": ' + "[" * (depth - 1) + "1" + "]" * (depth - 1) + "}")
    assert scoring.nesting_depth(value, depth + 1) == depth
    assert score_accuracy({"a": 1, "b": 2}, value) == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": ' + "9" * 401 + "}", 0.0),  # the 401-digit integer against a float
        ('{"a": -' + "9" * 401 + "}", 0.0),
        ('{"a": NaN}', 0.0),
        ('{"a": Infinity}', 0.0),
        ('{"a": 1e400}', 0.0),  # a float too large: infinity
        ('{"a": 0.5}', 1.0),
    ],
)
def test_submitted_numbers_of_any_size_are_scored(text, expected):
    read = scoring.read_submission(text)
    assert read.problem == ""
    assert score_accuracy({"a": 0.5}, read.value) == expected


def test_an_integer_too_long_to_convert_is_a_problem_not_a_crash():
    read = scoring.read_submission('{"a": ' + "9" * 5000 + "}")  # past Python's 4300 digits
    assert (read.value, read.submitted) == (None, True)
    assert "not valid JSON" in read.problem and "scores 0" in read.problem


# --- script-executed as the paper defines it (issue 31 item 4) -----------------------------------


@pytest.mark.parametrize(
    ("entrypoint", "code"),
    [
        ("train.py", "!python train.py"),
        ("train.py", "!python3 train.py --epochs 1"),
        ("train.py", "!python3.10 -u -W ignore train.py"),
        ("train.py", "!/usr/bin/python3 -X dev train.py"),
        ("src/train.py", "!python -m src.train"),
        ("src/train.py", "!python3 -mtrain"),
        ("run.sh", "!bash run.sh"),
        ("run.sh", "!sh -x run.sh arg"),
        ("run.sh", "!bash -o pipefail run.sh"),
        ("run.sh", "!./run.sh"),
        ("scripts/run.sh", "!scripts/run.sh --fast"),
        ("run.sh", "!source run.sh"),
        ("run.sh", '!bash -c "cd src && ./run.sh"'),
        ("train.py", "!accelerate launch --num_processes 1 train.py --lr 1e-4"),
        ("train.py", "!torchrun --nproc_per_node=1 train.py"),
        ("train.py", "!deepspeed --num_gpus 1 train.py --deepspeed ds.json"),
        ("train.py", "!python -m torch.distributed.launch --nproc_per_node 2 train.py"),
        ("train.py", "%run train.py --epochs 1"),
        ("train.py", "%run -i train.py"),
        ("train.py", "!cd /content/repo && python train.py"),
        ("train.py", "!(cd src; python train.py)"),
        ("train.py", "%cd src\n!python train.py"),
        ("train.py", "!nohup python train.py > log.txt 2>&1 &"),
        ("train.py", "!CUDA_VISIBLE_DEVICES=-1 PYTHONPATH=.. python train.py"),
        ("train.py", '!CUDA_VISIBLE_DEVICES="," python train.py'),
        ("train.py", "!env WANDB_MODE=offline timeout 600 python train.py"),
        ("train.py", "!time nice -n 10 python train.py | tee out.log"),
        ("train.py", "!python train.py \\\n  --epochs 1 \\\n  --lr 0.1"),
        ("train.py", "!python 'train.py' --name \"a b\""),
        ("train.py", "%%bash\ncd src\npython train.py --epochs 1"),
        ("train.py", "%%time\n!python train.py"),
        ("train.py", "out = !python train.py"),
        ("train.py", "import os\nos.system('python train.py --epochs 1')"),
        ("train.py", 'import subprocess\nsubprocess.run(["python", "train.py"], check=True)'),
        ("train.py", "!cat config.yaml && python train.py"),
    ],
)
def test_script_executed_counts_an_interpreter_or_launcher_given_the_file(entrypoint, code):
    assert scoring.runs_entrypoint(entrypoint, code)
    assert score_script_executed(entrypoint, [cell(code, duration_s=11)]) == 1.0


@pytest.mark.parametrize(
    "code",
    [
        "!cat train.py",
        "!head -n 50 train.py",
        "!tail -f train.py",
        "!less train.py",
        "!more train.py",
        "!grep -n 'lr' train.py",
        "!sed -n '1,40p' train.py",
        "!sed -i 's/cuda/cpu/' train.py",
        "!wc -l train.py",
        "!vim train.py",
        "!nano train.py",
        "!head -82 train.py | tail",
        "!cat train.py | grep argparse",
        "!ls -la train.py && cat train.py",
        "# !python train.py",  # a comment runs nothing
        "!python train.py.bak",
        "!python train.pyc",
        "!python train.py~",
        "!python pretrain.py",
        "!python -c 'import train' train.py",
        "!python -m trainer",
        "!python -- train.bak",
        "%load train.py",
        "%pycat train.py",
        "%%writefile train.py\nprint('hi')",
        "print(open('train.py').read())",
        "!echo python train.py",
        "!train.py",  # not on PATH and not a path: the shell finds no such command
        "!accelerate config train.py",
        "!torchrun --nproc_per_node=1 eval.py train.py",
    ],
)
def test_script_executed_is_not_counted_for_readers_editors_or_other_files(code):
    """However long the cell: 11 s and no error, only the command does not run the file."""
    assert not scoring.runs_entrypoint("train.py", code)
    assert score_script_executed("train.py", [cell(code, duration_s=600)]) == 0.0


def test_script_executed_other_files_of_a_shell_entrypoint():
    for code in ("!bash run.sh.bak", "!cat run.sh", "!./run.sh~", "!chmod +x run.sh"):
        assert score_script_executed("run.sh", [cell(code, duration_s=60)]) == 0.0, code
    assert (
        score_script_executed("run.sh", [cell("!chmod +x run.sh && ./run.sh", duration_s=60)])
        == 1.0
    )


def test_script_executed_reads_any_cell_without_raising():
    odd = ["!python 'train.py", "!", "%%bash", "!bash -c", "!python -m", "!" + "(" * 10_000]
    odd += ["!bash -c 'bash -c \"bash -c \\'bash -c python train.py\\'\"'", "!env", "!nohup"]
    for code in odd:
        assert score_script_executed("train.py", [cell(code, duration_s=60)]) in (0.0, 1.0)
