"""The HTML report as a person sees it: real runs (SOLUTION_AGENT, local kernels) rendered by a real
headless Chromium from disk, with the network off, checked on the rendered DOM and photographed.

Screenshots go to the test's own folder (tmp_path) and are recorded as the `screenshot` property of
the test in JUnit; `PYTEST_SUPER_SCREENSHOTS=DIR` copies them to DIR too (docs/img is made so).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super import html
from pytest_super.cli import main as cli_main
from pytest_super.errors import SuperWarning
from tests.support.projects import SOLUTION_AGENT, write_solution_agent
from tests.support.projects import junit_properties as read_junit_properties

EXPERT_PASS = """\
id: adder
query: 'Add the numbers. Report the sum as a json structured as follows: {"sum": 0}.'
answer: {sum: 5}
landmarks: ['adding \\d+ numbers', 'done']
solution:
  - execute: |
      nums = [2, 3]
      print(f"adding {len(nums)} numbers")
  - execute: |
      import json
      print("done")
      print(json.dumps({"sum": sum(nums)}))
"""

# Fails at the default tolerance (0.52 vs 0.5), passes with --super-tolerance=0.05: a flip.
# Its output carries markup that must be shown as text, never run.
EXPERT_FLIP = """\
id: almost
query: 'Report the score and the name as {"score": 0.0, "name": ""}.'
answer: {score: 0.5, name: "x"}
landmarks: ['epoch \\d+ loss [\\d.]+', 'never printed']
solution:
  - execute: |
      print("epoch 3 loss 0.125 after warm-up")
      print('<script>document.title="PWNED";document.body.setAttribute("data-pwned","1")</script>')
      print("<b>not bold</b>")
  - execute: |
      import json
      print(json.dumps({"score": 0.52, "name": "x"}))
"""

MASKED = """\
id: adder_data,cpu
query: I have already executed some of the required steps. Now, report the sum.
answer: {sum: 5.5}
landmarks: ['prefix ran', 'total']
pre_executed:
  - execute: |
      print("prefix ran")
      open("config.txt", "w").write("a = 2\\nb = 3\\n")
  - edit:
      file: config.txt
      before: |
        b = 3
      after: |
        b = 3.5
solution:
  - execute: |
      import json
      values = dict(line.split(" = ") for line in open("config.txt").read().splitlines())
      print("total", sum(float(v) for v in values.values()))
      for i in range(40):
          print(f"log line {i}")
      print(json.dumps({"sum": sum(float(v) for v in values.values())}))
"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: scripts/ensure-chromium.sh installs it")
        pytest.skip("no chromium (scripts/ensure-chromium.sh installs it)")
    return found


def browser_args(out: Path) -> list[str]:
    """Headless Chromium that cannot reach any network: every host name resolves to nothing and
    no proxy is used, so a page that needed a CDN would render without it."""
    return [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-proxy-server",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={out / 'chromium-profile'}",
    ]


def render(page: Path, out: Path, fragment: str = "") -> str:
    """The page's DOM after its scripts ran, as Chromium serializes it."""
    done = subprocess.run(
        [*browser_args(out), "--dump-dom", page.resolve().as_uri() + fragment],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, out: Path, name: str, height: int = 1100) -> Path:
    shot = out / f"{name}.png"
    done = subprocess.run(
        [
            *browser_args(out),
            "--hide-scrollbars",
            f"--window-size=1360,{height}",
            f"--screenshot={shot}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
    keep = os.environ.get("PYTEST_SUPER_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two real runs of three tasks on local kernels, with an agent that runs the solution cells
    as gold does but is not gold (a gold miss is an environment error, not a failure): the second
    with a looser tolerance, so `almost` fails in the first and passes in the second."""
    root = tmp_path_factory.mktemp("project")
    # pythonpath: the pytest command, unlike `python -m pytest`, does not import from its folder
    (root / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\npythonpath = .\n")
    for rel, text in {
        "tasks/expert/adder.yaml": EXPERT_PASS,
        "tasks/expert/almost.yaml": EXPERT_FLIP,
        "tasks/masked/adder_data,cpu.yaml": MASKED,
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    write_solution_agent(root)
    runs = []
    for tolerance in ("0.01", "0.05"):
        before = set((root / "reports").glob("*")) if (root / "reports").exists() else set()
        done = subprocess.run(
            [
                str(Path(os.sys.executable).parent / "pytest"),
                "tasks",
                f"--super-agent={SOLUTION_AGENT}",
                "--super-backend=local",
                f"--super-tolerance={tolerance}",
                f"--junitxml={root / f'junit-{tolerance}.xml'}",
                "--super-report-dir=reports",
                "-p",
                "no:randomly",
                "-q",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "HTML report: " in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
        (run_dir,) = set((root / "reports").glob("*")) - before
        runs.append(run_dir)
    return runs


def test_every_run_writes_its_report_and_the_terminal_names_it(two_runs):
    for run_dir in two_runs:
        assert (run_dir / "index.html").is_file()
        assert len(list((run_dir / "tasks").glob("*.html"))) == 3


def test_junit_links_trajectories_relative_to_the_report_folders_parent(two_runs):
    root = two_runs[0].parent.parent
    props = read_junit_properties(root / "junit-0.01.xml")
    trajectory = props["almost"]["super.trajectory"]
    assert trajectory == f"reports/{two_runs[0].name}/trajectories/almost.ipynb"
    assert (root / trajectory).is_file()
    # no entrypoint: the script-executed metric does not apply, and says so with an empty value
    assert props["almost"]["super.script_executed"] == ""


def test_pages_are_self_contained(two_runs):
    for page in [two_runs[0] / "index.html", *sorted((two_runs[0] / "tasks").glob("*.html"))]:
        text = page.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), page
        assert "<link" not in text and "@import" not in text, page


def test_front_page_in_the_browser(two_runs, tmp_path, record_property):
    first = two_runs[0]
    dom = render(first / "index.html", tmp_path)
    rows = re.findall(r'<tr class="task-row"[^>]*data-task="([^"]+)"', dom)
    assert sorted(rows) == ["adder", "adder_data,cpu", "almost"]
    # the summary in the paper's shape: per set, per masked category, overall
    summary = dom[dom.index('class="summary"') : dom.index("</table>")]
    for group in (">expert<", ">masked<", ">masked:data<", ">masked:cpu<", ">all<"):
        assert group in summary, group
    # expert accuracy 1 and 0.5 (one key of two): mean 75.0; two tasks resample to means 0.5,
    # 0.75, 1 with chances 1/4, 1/2, 1/4, so the interval is [50.0-100.0]
    assert "<b>75.0</b>" in summary and "[50.0–100.0]" in summary
    assert 'data-outcome="failed" data-task="almost"' in dom
    assert "3 of 3 shown" in dom
    record_property("screenshot", str(screenshot(first / "index.html", tmp_path, "front-page")))


def test_front_page_filters_and_sorts_in_the_browser(two_runs, tmp_path):
    dom = render(two_runs[0] / "index.html", tmp_path, "#outcome=failed")
    assert "1 of 3 shown" in dom
    hidden = re.findall(r'<tr class="task-row"[^>]*data-task="([^"]+)"[^>]*hidden', dom)
    assert sorted(hidden) == ["adder", "adder_data,cpu"]
    dom = render(two_runs[0] / "index.html", tmp_path, "#set=masked&category=cpu")
    assert "1 of 3 shown" in dom


def test_failing_task_page_in_the_browser(two_runs, tmp_path, record_property):
    page = two_runs[0] / html.page_name("almost")
    dom = render(page, tmp_path)
    # the answer key by key: score missed (0.5 vs 0.52), name matched
    answer = dom[dom.index('id="answer"') :]
    answer = answer[: answer.index("</table>")]
    assert re.search(
        r'<tr class="miss">\s*<td><code>score</code></td>\s*<td><code>0.5</code>'
        r"</td>\s*<td><code>0.52</code>",
        answer,
    ), answer
    assert re.search(r'<tr class="ok">\s*<td><code>name</code>', answer), answer
    # a landmark hit with the excerpt that matched, a miss without one
    landmarks = dom[dom.index('id="landmarks"') :]
    assert "epoch 3 loss 0.125 after warm-up" in landmarks
    assert re.search(
        r'<li class="miss">\s*<span class="mark">miss</span> <code>never printed', landmarks
    )
    # hostile output is shown as text and never runs
    assert "&lt;script&gt;document.title=" in dom
    assert "&lt;b&gt;not bold&lt;/b&gt;" in dom
    assert "PWNED" not in dom.split("<title>")[1].split("</title>")[0]
    assert 'data-pwned="1"' not in dom
    # links to the notebook and the JSON trajectory, which exist beside the report
    for link in re.findall(r'href="\.\./(trajectories/[^"]+)"', dom):
        assert (two_runs[0] / link).is_file(), link
    assert ".ipynb" in dom and "trajectory (JSON)" in dom
    record_property("screenshot", str(screenshot(page, tmp_path, "task-page", height=1500)))


def test_masked_task_page_marks_the_prefix_and_shows_edits_as_diffs(two_runs, tmp_path):
    dom = render(two_runs[0] / html.page_name("adder_data,cpu"), tmp_path)
    assert dom.count('<span class="badge pre">pre-executed</span>') == 2
    # the episode's count tells the prefix from the agent's steps (the facts count the agent's)
    assert re.search(r"Episode <small>\d+ steps: 2 pre-executed, \d+ by the agent", dom)
    assert '<span class="del">-b = 3</span>' in dom
    assert '<span class="add">+b = 3.5</span>' in dom
    # the 40-line output is folded, its head visible
    assert re.search(r'<details class="obs"><summary>output, \d+ lines', dom)


def test_runs_side_by_side_in_the_browser(two_runs, tmp_path, record_property):
    out = tmp_path / "compare"
    assert cli_main(["html", *map(str, two_runs), "--out", str(out)]) == 0
    dom = render(out / "index.html", tmp_path)
    rows = {
        task: flag
        for flag, task in re.findall(
            r'<tr class="task-row( flipped)?"[^>]*data-task="([^"]+)"', dom
        )
    }
    assert rows == {"adder": "", "almost": " flipped", "adder_data,cpu": ""}
    almost = dom[dom.index('data-task="almost"') :]
    almost = almost[: almost.index("</tr>")]
    assert re.findall(r'class="badge (\w+)"', almost) == ["failed", "passed"]
    assert "1 flipped" in dom
    # each run's cell links to that run's task page
    for link in re.findall(r'href="([^"]+tasks/almost\.html)"', almost):
        assert (out / link).resolve().is_file(), link
    dom = render(out / "index.html", tmp_path, "#flipped=1")
    assert "1 of 3 shown" in dom
    record_property("screenshot", str(screenshot(out / "index.html", tmp_path, "compare")))


def test_html_command_rebuilds_a_run_and_rejects_a_folder_without_results(
    two_runs, tmp_path, capsys, monkeypatch
):
    (two_runs[0] / "index.html").unlink()
    assert cli_main(["html", str(two_runs[0])]) == 0
    assert capsys.readouterr().out.strip() == str(two_runs[0] / "index.html")
    # named relative to the working folder when inside it (red before issue 30 item 6: in full)
    monkeypatch.chdir(two_runs[0].parent)
    assert cli_main(["html", str(two_runs[0])]) == 0
    assert capsys.readouterr().out.strip() == os.path.join(two_runs[0].name, "index.html")
    assert (two_runs[0] / "index.html").is_file()
    assert cli_main(["html", str(tmp_path)]) == 2
    assert "no results.jsonl" in capsys.readouterr().err


def test_runs_of_any_origin_render_with_what_they_have(tmp_path):
    """A run in the results.jsonl + trajectory form with less in it (an imported run: no scoring
    details; a broken trajectory; an unknown exit status) still renders, and compares."""
    run = tmp_path / "reports" / "paper-react-super"
    (run / "trajectories").mkdir(parents=True)
    (run / "trajectories" / "colbert.json").write_text(
        '{"task_id": "colbert", "query": "Train it.", "agent": "react-super", "info": '
        '{"submission": {"loss": 0.4}}, "steps": [{"thought": "go", "action": "execute", '
        '"content": "!python train.py", "observation": "loss: 0.4"}]}'
    )
    (run / "trajectories" / "broken.json").write_text('{"task_id": "bro')
    (run / "results.jsonl").write_text(
        '{"task_id": "colbert", "outcome": "failed", "set": "expert", "accuracy": 0.0, '
        '"trajectory": "trajectories/colbert.ipynb", "exit_status": "imported"}\n'
        '{"task_id": "broken", "outcome": "passed", "set": "expert", "accuracy": 1.0, '
        '"trajectory": "trajectories/broken.ipynb"}\n'
    )
    with pytest.warns(SuperWarning, match=r"broken\.json: trajectory not shown \(JSONDecodeError"):
        index = html.write_run_report(run)
    colbert = (run / html.page_name("colbert")).read_text()
    assert "submitted: <code>{&#34;loss&#34;: 0.4}</code>" in colbert
    assert "!python train.py" in colbert and "loss: 0.4" in colbert
    assert "no readable trajectory" in (run / html.page_name("broken")).read_text()
    assert 'data-task="colbert"' in index.read_text()
    with pytest.warns(SuperWarning, match=r"broken\.json: trajectory not shown"):
        compare = html.write_comparison([run, run], tmp_path / "cmp")
    assert "0 flipped" in compare.read_text()


def test_landmark_excerpts_keep_the_outputs_lines():
    from pytest_super.scoring import match_landmarks

    outputs = ["warming up\n", "epoch 1\r epoch 5 | loss 0.5\nsaved to out.json\n"]
    hit, miss = match_landmarks([r"epoch 5 \| loss [\d.]+ saved", "never"], outputs)
    assert (hit.step, miss.step, miss.excerpt) == (1, None, "")
    assert hit.excerpt == outputs[1].rstrip("\n") + "\n"
    assert html.clean_for_model(hit.excerpt) == " epoch 5 | loss 0.5\nsaved to out.json\n"


def test_front_page_charts_masked_categories_beside_the_papers_runs_in_the_browser(
    two_runs, tmp_path, record_property
):
    """One chart where people would rather look than read: accuracy and landmarks per masked
    category, our run beside the paper's Masked run imported into the same report folder."""
    from tests.support.published_data import sample_runs

    reports_dir = tmp_path / "reports"
    ours = reports_dir / two_runs[0].name
    shutil.copytree(two_runs[0], ours)
    (paper,) = sample_runs().iterdir()
    assert cli_main(["import-trajectories", str(paper), "--out", str(reports_dir)]) == 0
    index = html.write_run_report(ours)
    dom = render(index, tmp_path)
    (chart,) = re.findall(r'<svg class="chart".*?</svg>', dom, re.DOTALL)
    bars = re.findall(r"<title>([^<]*?): (\w+) (accuracy|landmarks) ([^<]*)</title>", chart)
    runs = {b[0] for b in bars}
    assert any(r.startswith(f"{SOLUTION_AGENT} (") for r in runs), runs
    assert "paper: swe-agent/gpt-4o-2024-08-06" in runs
    categories = {b[1] for b in bars}
    assert {"data", "cpu", "issue", "configuration", "goal"} <= categories
    # our masked task passed: 100% accuracy in its categories; the paper's goal episode 0%
    assert ("data", "accuracy", "100%") in {
        (b[1], b[2], b[3]) for b in bars if b[0] in runs - {"paper: swe-agent/gpt-4o-2024-08-06"}
    }
    assert ("paper: swe-agent/gpt-4o-2024-08-06", "goal", "landmarks", "67%") in bars
    shot = screenshot(index, tmp_path, "report-category-chart", height=1400)
    record_property("screenshot", str(shot))


def test_summary_shows_no_submitted_for_auto_and_the_all_row_leaves_it_out():
    """Auto tasks have no submission by design: their submitted is `-` (text) / `–` (HTML), not
    0.0, and the `all` row's submitted is the mean over the sets where it applies."""
    from pytest_super import report

    def record(task_id: str, set_name: str, submitted: bool, script: float | None):
        return report.TaskRecord(
            task_id,
            "passed",
            {"set": set_name, "submitted": submitted, "script_executed": script, "accuracy": None},
        )

    records = [
        record("e1", "expert", True, None),
        record("e2", "expert", True, None),
        record("a1", "auto", False, 1.0),
        record("a2", "auto", False, 0.0),
    ]
    rows = {r.group: r for r in report.summarize(records)}
    assert rows["auto"].submitted is None and rows["auto"].landmarks is None
    assert rows["all"].submitted == 1.0  # the experts' mean, not (1 + 1 + 0 + 0) / 4
    assert rows["all"].script_executed == 0.5
    table = report.format_table({"run": list(rows.values())}).splitlines()
    header = table[0].split()
    (auto,) = [line.split() for line in table if line.startswith("auto")]
    assert auto[header.index("sub%")] == "-"
    (every,) = [line.split() for line in table if line.startswith("all")]
    assert every[header.index("sub%")].startswith("100.0")


def test_a_run_compiles_its_reports_templates_in_the_background_once_a_process(tmp_path):
    """`html.warm_up` (started by every run record): the run report's templates are compiled
    by the time a run ends, once a process, in the one environment every report uses."""
    script = (
        "from pytest_super import html\n"
        "env = html._environment()\n"
        "before = sorted(name for _, name in env.cache.keys())\n"
        "thread = html.warm_up()\n"
        "assert html.warm_up() is thread, 'a second warm-up thread'\n"
        "thread.join(60)\n"
        "assert html._environment() is env, 'a second environment'\n"
        "print(before, sorted(name for _, name in env.cache.keys()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "[]",
        "['_macros.html.j2',",
        "'base.html.j2',",
        "'index.html.j2',",
        "'task.html.j2']",
    ], done.stdout
