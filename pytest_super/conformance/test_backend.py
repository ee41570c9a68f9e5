"""What every kernel backend's kernels must do (`kernels.base.Kernel`, `KernelBackend`).

Run against a backend with `pytest --pyargs pytest_super.conformance --super-backend NAME`.
Each test names the capabilities it needs (`needs`); a backend that declares one unsupported
has the test skipped with its reason.
"""

from __future__ import annotations

import dataclasses
import pickle
import time

import pytest

from pytest_super import kernels
from pytest_super.conformance.conftest import OUTPUT_CAP_BYTES, provision
from pytest_super.errors import EngineUnavailable
from pytest_super.kernels.base import (
    BackendResources,
    Kernel,
    KernelBackend,
    KernelSettings,
    PreparedImage,
)

#: seconds a cell that should finish quickly may take (a slow engine, a loaded machine)
QUICK_S = 60.0


def run_ok(kernel: Kernel, code: str) -> str:
    """Run `code`, which must succeed, and return its output."""
    result = kernel.execute(code, QUICK_S)
    assert result.status == "ok", f"{code!r} -> {result.status}: {result.output}"
    return result.output


@pytest.mark.needs("code")
def test_a_kernel_is_ready_and_describes_itself(kernel: Kernel) -> None:
    assert isinstance(kernel, Kernel)
    assert isinstance(kernel.description, str) and kernel.description.strip()
    assert kernel.is_alive()
    kernel.check_limits()  # a fresh kernel is within its limits
    assert run_ok(kernel, "print(6 * 7)").strip() == "42"


@pytest.mark.needs("code")
def test_stdout_lines_come_in_order(kernel: Kernel) -> None:
    code = "import sys, time\nfor i in range(200):\n    print(f'line {i}')\n    sys.stdout.flush()"
    assert run_ok(kernel, code).splitlines() == [f"line {i}" for i in range(200)]


@pytest.mark.needs("code")
def test_stderr_is_captured_in_order_with_stdout(kernel: Kernel) -> None:
    code = (
        "import sys, time\n"
        "print('out 1', flush=True); time.sleep(0.2)\n"
        "print('err 1', file=sys.stderr, flush=True); time.sleep(0.2)\n"
        "print('out 2', flush=True)\n"
        "!echo 'shell err' >&2"
    )
    lines = [line.strip() for line in run_ok(kernel, code).splitlines() if line.strip()]
    assert lines == ["out 1", "err 1", "out 2", "shell err"]


@pytest.mark.needs("code")
def test_rich_output_is_its_text_plain(kernel: Kernel) -> None:
    code = (
        "from IPython.display import display\n"
        "class Rich:\n"
        "    def _repr_html_(self): return '<b>html only</b>'\n"
        "    def __repr__(self): return 'Rich(plain)'\n"
        "display(Rich())\n"
        "{'answer': 42}"
    )
    output = run_ok(kernel, code)
    assert "Rich(plain)" in output  # display_data's text/plain
    assert "{'answer': 42}" in output  # execute_result's text/plain
    assert "<b>" not in output


@pytest.mark.needs("code")
def test_an_error_is_status_error_with_its_traceback(kernel: Kernel) -> None:
    result = kernel.execute("def f():\n    return 1 / 0\nf()", QUICK_S)
    assert result.status == "error"
    assert "ZeroDivisionError" in result.output and "division by zero" in result.output
    assert run_ok(kernel, "print('still here')").strip() == "still here"


@pytest.mark.needs("code", "timeout")
def test_a_cell_timeout_stops_the_cell_and_keeps_state(kernel: Kernel) -> None:
    run_ok(kernel, "kept = 41")
    started = time.perf_counter()
    result = kernel.execute("import time\nprint('started', flush=True)\ntime.sleep(120)", 2.0)
    elapsed = time.perf_counter() - started
    assert result.status == "timeout" and not result.still_running
    assert "started" in result.output
    assert elapsed < 30, f"a 2 s timeout took {elapsed:.1f} s"
    assert run_ok(kernel, "print(kept + 1)").strip() == "42"


@pytest.mark.needs("code", "timeout")
def test_a_cell_left_running_at_its_timeout_can_be_waited_for(kernel: Kernel) -> None:
    code = "import time\nprint('a', flush=True)\ntime.sleep(3)\nprint('b')\nwaited = True"
    first = kernel.execute(code, 1.0, interrupt_on_timeout=False)
    assert (first.status, first.still_running) == ("timeout", True)
    rest = kernel.wait(QUICK_S)
    assert rest.status == "ok" and not rest.still_running
    assert "a" in first.output and "b" in first.output + rest.output
    assert run_ok(kernel, "print(waited)").strip() == "True"


@pytest.mark.needs("code", "timeout", "interrupt")
def test_interrupt_stops_a_running_cell_and_keeps_state(kernel: Kernel) -> None:
    run_ok(kernel, "before_interrupt = 'kept'")
    code = "import time\nfor i in range(600):\n    print(i, flush=True)\n    time.sleep(0.1)"
    first = kernel.execute(code, 1.0, interrupt_on_timeout=False)
    assert first.still_running
    started = time.perf_counter()
    rest = kernel.interrupt()
    assert time.perf_counter() - started < 30
    assert rest.status in ("timeout", "error")  # stopped, not finished
    assert not rest.still_running
    assert run_ok(kernel, "print(before_interrupt)").strip() == "kept"
    assert kernel.interrupt().status == "ok"  # nothing running: nothing to interrupt


@pytest.mark.needs("code", "death")
def test_a_kernel_that_dies_in_a_cell_is_reported_and_replaced(fresh_kernel: Kernel) -> None:
    run_ok(fresh_kernel, "lost = 1")
    result = fresh_kernel.execute("import os\nprint('bye', flush=True)\nos._exit(3)", QUICK_S)
    assert result.status == "died", result
    assert fresh_kernel.is_alive()  # replaced by a fresh process
    assert run_ok(fresh_kernel, "print('lost' in dir())").strip() == "False"


@pytest.mark.needs("code", "death")
def test_a_kernel_that_dies_between_cells_is_not_alive(fresh_kernel: Kernel) -> None:
    run_ok(fresh_kernel, "import os, threading\nthreading.Timer(0.2, os._exit, (3,)).start()")
    deadline = time.monotonic() + 30
    while fresh_kernel.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not fresh_kernel.is_alive()
    result = fresh_kernel.execute("print('after')", QUICK_S)
    assert result.status == "died", result
    assert run_ok(fresh_kernel, "print('again')").strip() == "again"


@pytest.mark.needs("code", "restart", "files")
def test_restart_gives_a_fresh_namespace_and_keeps_files(fresh_kernel: Kernel) -> None:
    run_ok(fresh_kernel, "stale = 'old state'\nopen('kept.txt', 'w').write('file survives')")
    fresh_kernel.restart()
    assert fresh_kernel.is_alive()
    assert run_ok(fresh_kernel, "print('stale' in dir())").strip() == "False"
    assert fresh_kernel.read_file("kept.txt") == "file survives"


@pytest.mark.needs("code")
def test_large_output_is_capped_at_the_backends_cap(kernel: Kernel) -> None:
    code = "for i in range(40_000):\n    print(f'{i:08d} ' + 'x' * 40)\nprint('THE END')"
    result = kernel.execute(code, QUICK_S)
    assert result.status == "ok"
    assert result.truncated
    size = len(result.output.encode())
    assert size <= OUTPUT_CAP_BYTES + 1024, f"{size} bytes kept, cap {OUTPUT_CAP_BYTES}"
    assert result.output.startswith("00000000 ")  # the start is kept...
    assert result.output.rstrip().endswith("THE END")  # ...and the end
    assert run_ok(kernel, "print('small')").strip() == "small"  # the next cell is whole


@pytest.mark.needs("code", "files")
def test_files_round_trip_text_and_bytes(kernel: Kernel) -> None:
    text = "héllo\nwörld\n\ttabs and trailing spaces   \n"
    kernel.write_file("conformance/deep/edit.txt", text)
    assert kernel.read_file("conformance/deep/edit.txt") == text
    data = bytes(range(256)) * 4 + b"\r\n\x00"
    kernel.write_bytes("conformance/blob.bin", data)
    assert kernel.read_bytes("conformance/blob.bin") == data
    # the kernel's code sees the same files, relative to its current directory
    seen = run_ok(kernel, "print(open('conformance/deep/edit.txt', encoding='utf-8').read()[:5])")
    assert seen.strip() == "héllo"
    run_ok(kernel, "open('conformance/made_by_cell.txt', 'w').write('from the cell')")
    assert kernel.read_file("conformance/made_by_cell.txt") == "from the cell"


@pytest.mark.needs("code", "files")
def test_reading_a_missing_file_raises_file_not_found(kernel: Kernel) -> None:
    for read in (kernel.read_file, kernel.read_bytes):
        with pytest.raises(FileNotFoundError):
            read("conformance/no/such/file.txt")
    assert run_ok(kernel, "print('fine')").strip() == "fine"  # the kernel is unharmed


@pytest.mark.needs("code")
def test_close_removes_the_kernel_and_cleanup_finds_nothing_of_the_run(
    backend: KernelBackend, settings: KernelSettings
) -> None:
    run = dataclasses.replace(settings, run_id=f"{settings.run_id}-closed")
    made = provision(backend, run, "conformance-close")
    run_ok(made, "x = 1")
    made.close()
    assert not made.is_alive()
    made.close()  # safe twice
    assert backend.cleanup_run(run, run.run_id) == []


@pytest.mark.needs("code", "leftovers")
def test_cleanup_run_removes_a_kernel_never_closed(
    backend: KernelBackend, settings: KernelSettings
) -> None:
    run = dataclasses.replace(settings, run_id=f"{settings.run_id}-left")
    made = provision(backend, run, "conformance-left")
    try:
        run_ok(made, "x = 1")
        removed = backend.cleanup_run(run, run.run_id)
        assert len(removed) == 1, removed
        assert not made.is_alive()
        assert backend.cleanup_run(run, run.run_id) == []
    finally:
        made.close()  # after cleanup removed its box: still safe


def test_the_optional_calls_answer_with_the_contracts_types(
    backend: KernelBackend, settings: KernelSettings
) -> None:
    """What the rest of the code asks through `pytest_super.kernels` (the backend's own methods
    or the defaults): the image made present, its resources, its engine's health and faults,
    the options its nodes need."""
    task = kernels.settings_for_task(settings, "default")
    prepared = kernels.prepare_kernel_image(task, "default")
    assert prepared is None or isinstance(prepared, PreparedImage), prepared
    if prepared is not None:
        assert prepared.how in ("present", "pulled", "built"), prepared  # the suite's image
        assert prepared.image and prepared.seconds >= 0
    resources = kernels.backend_resources(settings)
    assert isinstance(resources, BackendResources)
    assert resources.memory_bytes is None or resources.memory_bytes > 0, resources
    assert resources.cpus is None or resources.cpus > 0, resources
    assert kernels.engine_problem(settings) == ""  # the engine the suite's kernels run on answers
    assert kernels.is_engine_fault(settings, EngineUnavailable("nothing answers"))
    assert not kernels.is_engine_fault(settings, ValueError("a bug of the harness"))
    options = kernels.node_options(settings)
    assert isinstance(options, dict)
    assert pickle.loads(pickle.dumps(options)) == options  # it crosses to another machine
