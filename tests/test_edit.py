"""Pins SUPER's edit tool: the action format, matching, every kind of feedback, and edits in a kernel."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_super.edit import (
    AFTER_MARKER,
    BEFORE_MARKER,
    EditFormatError,
    EditOutcome,
    EditRequest,
    apply_edit,
    edit_file,
    format_edit,
    parse_edit,
)
from pytest_super.kernels.jupyter.runtime import JupyterKernel
from pytest_super.kernels.local import LocalBox

# --- parse / format -----------------------------------------------------------------------------


def test_parse_edit_reads_all_parts():
    content = (
        "repo/config.py\n"
        "def setup():\n"
        "<<<BEFORE_EDIT>>>\n"
        "    device = 'cuda'\n"
        "    batch = 64\n"
        "<<<AFTER_EDIT>>>\n"
        "    device = 'cpu'\n"
    )
    assert parse_edit(content) == EditRequest(
        file="repo/config.py",
        before="    device = 'cuda'\n    batch = 64\n",
        after="    device = 'cpu'\n",
        context="def setup():\n",
    )


def test_parse_edit_without_context_or_final_newline():
    request = parse_edit(" train.py \n<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\nx = 2")
    assert request == EditRequest(file="train.py", before="x = 1\n", after="x = 2\n")


def test_parse_edit_skips_blank_lines_before_the_file_name():
    request = parse_edit("\n  \ncfg.json\n<<<BEFORE_EDIT>>>\n{\n<<<AFTER_EDIT>>>\n[\n")
    assert request == EditRequest(file="cfg.json", before="{\n", after="[\n")


def test_parse_edit_empty_after_deletes():
    request = parse_edit("a.py\n<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\n")
    assert request.after == ""
    assert request.before == "x = 1\n"


def test_parse_edit_keeps_blank_lines_inside_the_blocks():
    request = parse_edit("a.py\n<<<BEFORE_EDIT>>>\n\nx = 1\n<<<AFTER_EDIT>>>\nx = 2\n\ny = 3\n")
    assert request.before == "\nx = 1\n"
    assert request.after == "x = 2\n\ny = 3\n"


def test_parse_edit_drops_blank_lines_after_the_new_lines_as_the_reference():
    """The reference strips every final newline of the action (issue 9, item 9)."""
    request = parse_edit("a.py\n<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\nx = 2\n\n\n")
    assert request.after == "x = 2\n"


def test_parse_edit_markers_may_carry_surrounding_spaces_and_crlf():
    request = parse_edit("a.py\r\n  <<<BEFORE_EDIT>>> \r\nx = 1\r\n<<<AFTER_EDIT>>>\r\nx = 2\r\n")
    assert request == EditRequest(file="a.py", before="x = 1\n", after="x = 2\n")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("a.py\nx = 1\n<<<AFTER_EDIT>>>\nx = 2", "AFTER_EDIT>>> before any"),
        ("a.py\nx = 1\nx = 2", "BEFORE_EDIT>>> is missing"),
        ("<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\nx = 2", "name of the file"),
        ("\n<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\nx = 2", "name of the file"),
        ("", "name of the file"),
        ("a.py\n<<<BEFORE_EDIT>>>\n<<<BEFORE_EDIT>>>\n<<<AFTER_EDIT>>>\nx", "second <<<BEFORE"),
        ("a.py\n<<<BEFORE_EDIT>>>\nx\n<<<AFTER_EDIT>>>\ny\n<<<AFTER_EDIT>>>", "second <<<AFTER"),
        ("a.py\n<<<BEFORE_EDIT>>>\nx\n<<<AFTER_EDIT>>>\n<<<BEFORE_EDIT>>>", "after"),
        ("a.py\n<<<BEFORE_EDIT>>>\n<<<AFTER_EDIT>>>\n", "no lines to replace and no new"),
    ],
)
def test_parse_edit_rejects_malformed_edits_showing_the_format(content, problem):
    with pytest.raises(EditFormatError) as info:
        parse_edit(content)
    message = str(info.value)
    assert problem in message
    assert "<file name>" in message and BEFORE_MARKER in message and AFTER_MARKER in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "request_",
    [
        EditRequest("a.py", "x = 1\n", "x = 2\n"),
        EditRequest("dir/b c.py", "\n  y\n\n", "", context="def f():\n    pass\n"),
        EditRequest("new.txt", "", "first\nsecond\n"),
        EditRequest("a.py", "x\n", "\n\ny\n"),
    ],
)
def test_format_and_parse_round_trip(request_):
    text = format_edit(request_)
    assert parse_edit(text) == request_
    assert format_edit(parse_edit(text)) == text


def test_format_edit_accepts_blocks_without_final_newline():
    text = format_edit(EditRequest("a.py", "x = 1", "x = 2", context="# c"))
    assert text == "a.py\n# c\n<<<BEFORE_EDIT>>>\nx = 1\n<<<AFTER_EDIT>>>\nx = 2\n"


# --- apply_edit: success ------------------------------------------------------------------------

SOURCE = """import argparse

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    print(args.device)


if __name__ == "__main__":
    main()
"""


def test_apply_edit_replaces_lines_and_says_which():
    outcome = apply_edit(
        SOURCE,
        EditRequest(
            "t.py",
            '    parser.add_argument("--device", default="cuda")\n',
            '    parser.add_argument("--device", default="cpu")\n'
            '    parser.add_argument("--seed", type=int, default=0)\n',
        ),
    )
    assert outcome.ok
    assert outcome.new_text == SOURCE.replace(
        'default="cuda")\n',
        'default="cpu")\n    parser.add_argument("--seed", type=int, default=0)\n',
    )
    assert "line 5 " in outcome.message and "2 line(s)" in outcome.message
    assert '\n 6|     parser.add_argument("--seed"' in outcome.message
    assert "\n 3| def main():" in outcome.message
    assert outcome.message.endswith("\n12|     main()")


def test_edit_success_shows_seven_lines_before_and_six_after_as_the_published_runs():
    """The published episodes' success feedback: 7 file lines before the new lines, 6 after."""
    text = "".join(f"line {i}\n" for i in range(1, 31))
    outcome = apply_edit(text, EditRequest("f.txt", "line 15\n", "new a\nnew b\n"))
    assert outcome.ok
    shown = outcome.message.split("\n")[1:]
    assert shown[0] == " 8| line 8" and shown[6] == "14| line 14"
    assert shown[7:9] == ["15| new a", "16| new b"]
    assert shown[9] == "17| line 16" and shown[-1] == "22| line 21" and len(shown) == 15


def test_parse_edit_without_after_marker_deletes_as_the_reference():
    request = parse_edit("a.py\n<<<BEFORE_EDIT>>>\nx = 1\nx = 2")
    assert request == EditRequest(file="a.py", before="x = 1\nx = 2\n", after="")


def test_lines_before_and_nothing_to_replace_insert_after_them():
    request = parse_edit("t.py\nimport os\n<<<BEFORE_EDIT>>>\n<<<AFTER_EDIT>>>\nimport sys\n")
    assert request == EditRequest("t.py", before="", after="import sys\n", context="import os\n")
    outcome = apply_edit("import os\nprint(1)\n", request)
    assert outcome.ok and outcome.new_text == "import os\nimport sys\nprint(1)\n"
    assert "Inserted 1 line(s) after line 1" in outcome.message
    at_end = apply_edit("x = 1\nimport os", request)  # no final newline: still none after
    assert at_end.ok and at_end.new_text == "x = 1\nimport os\nimport sys"
    twice = apply_edit("import os\nimport os\n", request)
    assert not twice.ok and "2 times" in twice.message
    missing = apply_edit("print(1)\n", request)
    assert not missing.ok and "the lines to insert after" in missing.message


def test_apply_edit_multi_line_span_and_deletion():
    outcome = apply_edit(
        SOURCE, EditRequest("t.py", "    args = parser.parse_args()\n    print(args.device)\n", "")
    )
    assert outcome.ok
    assert "Deleted lines 6-7" in outcome.message
    assert "print(args.device)" not in outcome.new_text
    assert outcome.new_text.endswith("    main()\n")


def test_apply_edit_preserves_missing_trailing_newline():
    outcome = apply_edit("a = 1\nb = 2", EditRequest("f", "b = 2\n", "b = 3\n"))
    assert outcome.new_text == "a = 1\nb = 3"
    outcome = apply_edit("a = 1\nb = 2\n", EditRequest("f", "b = 2", "b = 3"))
    assert outcome.new_text == "a = 1\nb = 3\n"


def test_apply_edit_preserves_crlf():
    outcome = apply_edit(
        "a = 1\r\nb = 2\r\nc = 3\r\n", EditRequest("f", "b = 2\n", "b = 3\nb2 = 4\n")
    )
    assert outcome.ok
    assert outcome.new_text == "a = 1\r\nb = 3\r\nb2 = 4\r\nc = 3\r\n"
    last = apply_edit("a\r\nb\r\n", EditRequest("f", "b\n", "B\n"))
    assert last.new_text == "a\r\nB\r\n"
    unterminated = apply_edit("a\r\nb", EditRequest("f", "b\n", "B\nC\n"))
    assert unterminated.new_text == "a\r\nB\r\nC"
    deleted = apply_edit("a\r\nb", EditRequest("f", "b\n", ""))
    assert deleted.new_text == "a"


def test_apply_edit_keeps_untouched_mixed_line_endings():
    outcome = apply_edit("a\r\nb\nc\n", EditRequest("f", "c\n", "C\n"))
    assert outcome.new_text == "a\r\nb\nC\n"


def test_blank_lines_match_blank_lines():
    text = "a = 1\n   \nb = 2\n"
    outcome = apply_edit(text, EditRequest("f", "a = 1\n\nb = 2\n", "ab = 3\n"))
    assert outcome.ok and outcome.new_text == "ab = 3\n"


def test_context_picks_the_occurrence():
    text = "def f():\n    return 1\n\ndef g():\n    return 1\n"
    outcome = apply_edit(
        text, EditRequest("f", "    return 1\n", "    return 2\n", context="def g():\n")
    )
    assert outcome.ok
    assert outcome.new_text == "def f():\n    return 1\n\ndef g():\n    return 2\n"
    assert "line 5 " in outcome.message


def test_context_must_stand_immediately_before():
    text = "def g():\n    x = 0\n    return 1\n"
    outcome = apply_edit(
        text, EditRequest("f", "    return 1\n", "    return 2\n", context="def g():\n")
    )
    assert not outcome.ok and outcome.new_text is None


def test_empty_before_writes_an_empty_file_only():
    outcome = apply_edit("", EditRequest("new.txt", "", "hello\nworld\n"))
    assert outcome.ok and outcome.new_text == "hello\nworld\n"
    assert "2 line(s)" in outcome.message
    refused = apply_edit("something\n", EditRequest("a.txt", "", "hello\n"))
    assert not refused.ok and refused.new_text is None
    assert "Malformed edit" in refused.message and "<file name>" in refused.message


def test_edit_that_empties_the_file():
    outcome = apply_edit("only\n", EditRequest("f", "only\n", ""))
    assert outcome.ok and outcome.new_text == ""


# --- apply_edit: feedback -----------------------------------------------------------------------


def test_whitespace_hint_shows_the_files_exact_lines():
    request = EditRequest(
        "t.py",
        'parser.add_argument("--device", default="cuda")\nargs = parser.parse_args()\n',
        "x\n",
    )
    outcome = apply_edit(SOURCE, request)
    assert not outcome.ok and outcome.new_text is None
    assert "whitespace" in outcome.message
    assert """5| '    parser.add_argument("--device", default="cuda")'""" in outcome.message
    assert "6| '    args = parser.parse_args()'" in outcome.message


def test_whitespace_hint_for_trailing_spaces_and_tabs():
    outcome = apply_edit("x = 1  \n\tif y:\n", EditRequest("f", "x = 1\n    if y:\n", "z\n"))
    assert not outcome.ok
    assert "1| 'x = 1  '" in outcome.message
    assert "2| '\\tif y:'" in outcome.message


def test_longest_partial_match_is_shown_with_its_location():
    request = EditRequest(
        "t.py",
        "def main():\n"
        "    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--device", default="gpu")\n'
        "    args = parser.parse_args()\n",
        "x\n",
    )
    outcome = apply_edit(SOURCE, request)
    assert not outcome.ok
    assert "your lines 1-2 of 4 match the file's lines 3-4" in outcome.message
    assert "3| def main():" in outcome.message and "4|     parser = argparse" in outcome.message
    assert "default=\"gpu\")', differs from the file's line 5" in outcome.message
    assert "whitespace" not in outcome.message


def test_longest_partial_match_prefers_the_longest_run():
    text = "a\nb\nc\nd\nx\ny\n"
    outcome = apply_edit(text, EditRequest("f", "x\nq\nb\nc\nd\n", "z\n"))
    assert "your lines 3-5 of 5 match the file's lines 2-4" in outcome.message
    assert "'q', does not stand just before them" in outcome.message


def test_partial_match_at_the_end_of_the_file():
    outcome = apply_edit("a\nb\nc\n", EditRequest("f", "b\nc\nd\n", "q\n"))
    assert "your lines 1-2 of 3 match the file's lines 2-3" in outcome.message
    assert "The next line you gave, 'd', is past the end of the file." in outcome.message
    single = apply_edit("a\nb\n", EditRequest("f", "x\nb\n", "q\n"))
    assert "your line 2 of 2 matches the file's line 2:\n2| b" in single.message


def test_partial_match_ignores_runs_of_only_blank_lines():
    outcome = apply_edit("a\n\nb\n", EditRequest("f", "zzz\n\nyyy\n", "q\n"))
    assert not outcome.ok
    assert "None of these lines is in the file" in outcome.message


def test_not_found_lists_the_requested_lines():
    outcome = apply_edit(SOURCE, EditRequest("t.py", "nothing like this\n", "x\n"))
    assert not outcome.ok
    assert (
        "Could not find the lines to replace in t.py:\n```\nnothing like this\n```"
        in outcome.message
    )


def test_several_occurrences_ask_for_context_and_show_two():
    text = "".join(f"# block {i}\nx = 1\ny = 2\n\n" for i in range(3))
    outcome = apply_edit(text, EditRequest("f.py", "x = 1\n", "x = 3\n"))
    assert not outcome.ok and outcome.new_text is None
    message = outcome.message
    assert "3 times" in message and "1-3 lines" in message and BEFORE_MARKER in message
    assert "Occurrence 1, line 2:\n1| # block 0\n2| x = 1\n3| y = 2\n4| \n" in message
    assert "Occurrence 2, line 6:\n4| \n5| # block 1\n6| x = 1\n7| y = 2\n8| " in message
    assert "Occurrence 3" not in message
    # the context it asks for then works
    fixed = apply_edit(text, EditRequest("f.py", "x = 1\n", "x = 3\n", context="# block 1\n"))
    assert fixed.ok and fixed.new_text.count("x = 3") == 1
    assert fixed.new_text.splitlines()[5] == "x = 3"


# --- edit_file in a real kernel -----------------------------------------------------------------


@pytest.fixture(scope="module")
def local_kernel():
    """A real ipykernel subprocess (the local backend), in a fresh temporary directory."""
    box = LocalBox(task_id="test-edit")
    kernel = JupyterKernel(box)
    try:
        yield kernel, Path(box.work_dir)
    finally:
        kernel.close()


@pytest.fixture
def kernel(local_kernel):
    return local_kernel[0]


@pytest.fixture
def workdir(local_kernel):
    return local_kernel[1]


def test_edit_file_edits_in_the_kernels_directory(kernel, workdir):
    path = workdir / "train.py"
    path.write_text(SOURCE)
    outcome = edit_file(
        kernel,
        parse_edit(
            'train.py\n<<<BEFORE_EDIT>>>\n    parser.add_argument("--device", default="cuda")\n'
            '<<<AFTER_EDIT>>>\n    parser.add_argument("--device", default="cpu")\n'
        ),
    )
    assert outcome.ok, outcome.message
    assert path.read_text() == SOURCE.replace('"cuda"', '"cpu"')
    assert outcome.new_text == path.read_text()


def test_edit_file_failure_leaves_the_file_alone(kernel, workdir):
    path = workdir / "same.py"
    path.write_text("x = 1\nx = 1\n")
    outcome = edit_file(kernel, EditRequest("same.py", "x = 1\n", "x = 2\n"))
    assert not outcome.ok and "2 times" in outcome.message
    assert path.read_text() == "x = 1\nx = 1\n"


def test_edit_file_keeps_crlf_and_no_final_newline(kernel, workdir):
    path = workdir / "win.txt"
    path.write_bytes(b"a\r\nb\r\nc")
    outcome = edit_file(kernel, EditRequest("win.txt", "c\n", "C\n"))
    assert outcome.ok, outcome.message
    assert path.read_bytes() == b"a\r\nb\r\nC"


def test_edit_file_keeps_non_ascii_text(kernel, workdir):
    path = workdir / "greek.py"
    path.write_text("alpha = 'α'\nname = 'café'\n", encoding="utf-8")
    outcome = edit_file(kernel, EditRequest("greek.py", "alpha = 'α'\n", "alpha = 'β'\n"))
    assert outcome.ok, outcome.message
    assert path.read_text(encoding="utf-8") == "alpha = 'β'\nname = 'café'\n"


def test_edit_file_missing_file(kernel, workdir):
    outcome = edit_file(kernel, EditRequest("no/such/file.py", "x = 1\n", "x = 2\n"))
    assert outcome == EditOutcome(False, outcome.message, None)
    assert "file not found" in outcome.message and "no/such/file.py" in outcome.message
    assert not (workdir / "no").exists()


def test_edit_of_a_missing_file_is_an_error_not_a_new_file(kernel, workdir):
    """As the reference (issue 9, item 9): an edit never creates a file."""
    outcome = edit_file(
        kernel, parse_edit("notes.txt\n<<<BEFORE_EDIT>>>\n<<<AFTER_EDIT>>>\nhello\n")
    )
    assert not outcome.ok and "file not found: notes.txt" in outcome.message
    assert not (workdir / "notes.txt").exists()


def test_an_existing_empty_file_may_be_written_without_lines_to_replace(kernel, workdir):
    (workdir / "empty.txt").write_text("")
    outcome = edit_file(
        kernel, parse_edit("empty.txt\n<<<BEFORE_EDIT>>>\n<<<AFTER_EDIT>>>\nhello\n")
    )
    assert outcome.ok, outcome.message
    assert (workdir / "empty.txt").read_text() == "hello\n"
    again = edit_file(kernel, parse_edit("empty.txt\n<<<BEFORE_EDIT>>>\n<<<AFTER_EDIT>>>\nbye\n"))
    assert not again.ok and "Malformed edit" in again.message
    assert (workdir / "empty.txt").read_text() == "hello\n"


def test_edit_file_follows_the_kernels_current_directory(kernel, workdir):
    (workdir / "sub").mkdir()
    (workdir / "sub" / "cfg.yaml").write_text("device: cuda\nepochs: 3\n")
    assert kernel.execute("%cd sub", timeout=30).status == "ok"
    try:
        outcome = edit_file(kernel, EditRequest("cfg.yaml", "device: cuda\n", "device: cpu\n"))
    finally:
        assert kernel.execute("%cd ..", timeout=30).status == "ok"
    assert outcome.ok, outcome.message
    assert (workdir / "sub" / "cfg.yaml").read_text() == "device: cpu\nepochs: 3\n"


def test_edit_file_on_a_directory_is_feedback_not_a_crash(kernel, workdir):
    (workdir / "adir").mkdir()
    outcome = edit_file(kernel, EditRequest("adir", "x\n", "y\n"))
    assert not outcome.ok and outcome.new_text is None
    assert "cannot read adir" in outcome.message and "Is a directory" in outcome.message


def test_failed_edit_of_a_latin1_file_leaves_it_alone(kernel, workdir):
    path = workdir / "other.py"
    path.write_bytes(b"# Ren\xe9\nlr = 0.1\n")
    outcome = edit_file(kernel, EditRequest("other.py", "lr = 0.5\n", "lr = 0.01\n"))
    assert not outcome.ok
    outcome.message.encode("utf-8")  # valid text for the model and the trajectory
    assert path.read_bytes() == b"# Ren\xe9\nlr = 0.1\n"


@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("big.txt", lambda p: p.write_bytes(b"x = 1\n" * 700_000), "larger than 4000000 bytes"),
        ("pipe.txt", lambda p: os.mkfifo(p), "FIFO"),
        ("null.txt", lambda p: p.symlink_to("/dev/null"), "character device"),
        ("zero.txt", lambda p: p.symlink_to("/dev/zero"), "character device"),
    ],
    ids=["4.2 MB", "fifo", "dev-null", "dev-zero"],
)
def test_an_edit_of_a_large_or_special_file_fails_at_once(kernel, workdir, name, make, says):
    """Issue 29 cause 9, on the local backend (the Docker kernel's test is in tests/attacks): a
    file over the 4 MB read bound or that is not a regular file is an `Edit failed` observation,
    at once; nothing is read whole, nothing is written."""
    path = workdir / name
    make(path)
    started = time.monotonic()
    outcome = edit_file(kernel, EditRequest(name, "x = 1\n", "x = 2\n"))
    assert time.monotonic() - started < 30  # a whole read of /dev/zero or a FIFO never ends
    assert not outcome.ok and outcome.message.startswith(f"Edit failed: cannot read {name}")
    assert says in outcome.message, outcome.message
    if path.is_file():
        assert path.stat().st_size == 4_200_000
    with pytest.raises(OSError, match=says):
        kernel.read_bytes(name)
    assert kernel.execute("print(6 * 7)", timeout=30).output == "42\n"
    path.unlink()


def test_a_write_to_a_fifo_is_refused_not_blocked(kernel, workdir):
    os.mkfifo(workdir / "out.fifo")
    started = time.monotonic()
    with pytest.raises(OSError, match="FIFO"):
        kernel.write_file("out.fifo", "x\n")
    assert time.monotonic() - started < 30  # a write to a FIFO nobody reads never ends
    (workdir / "out.fifo").unlink()
