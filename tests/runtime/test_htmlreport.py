"""`harnessc report`: the run's HTML page and Markdown summary, from real runs (in-process in
virtual time, real SQLite; a process where matplotlib is hidden from its imports) and from a
large recorded run; the page in a real headless Chromium."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from . import browser, virtual
from .bigrun import write_big_roadmap, write_big_run
from .browser import load_page
from .helpers import REPO, SIMPLE_CONTRACT, env, harnessc, node, write_project

pytest.importorskip("matplotlib", reason="harnessc[report] is not installed")

SECRET = "tok-9f8e7d6c5b4a39281706"


def _worker(tmp_path: Path) -> Path:
    """A command agent: rejected once (bad JSON), then a valid answer that prints the token
    it was passed (a secret the run must not let out)."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(f"""\
        import json, os, sys
        sys.stdin.read()
        mark = os.path.join({str(tmp_path)!r}, "called-" + os.environ["HARNESSC_TASK"])
        first = not os.path.exists(mark)
        open(mark, "a").close()
        if first and os.environ["HARNESSC_TASK"] == "beta":
            print("no json here, token " + os.environ["SERVICE_TOKEN"])
        else:
            print(json.dumps({{"title": "done with " + os.environ["SERVICE_TOKEN"], "score": 3}}))
        """))
    return script


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    accept = [{"id": "listing", "argv": [sys.executable, "-c", "print('checked 3 files: ok')"], "timeout": 30}]
    write_project(root, [node("alpha", contract="summary", accept=accept, wave=0,
                              routing={"agent": "writer", "chain": [], "reason": "test"}),
                         node("beta", contract="summary", depends_on=["alpha"], wave=1,
                              routing={"agent": "worker", "chain": [], "reason": "test"})],
                  agents={"writer": {"provider": "command", "command": [sys.executable, str(_worker(tmp_path))],
                                        "pass_env": ["SERVICE_TOKEN"], "timeout": 30},
                          "worker": {"provider": "command", "command": [sys.executable, str(_worker(tmp_path))],
                                     "pass_env": ["SERVICE_TOKEN"], "timeout": 30}},
                  contracts={"summary": SIMPLE_CONTRACT})
    return root


def test_run_says_where_its_report_goes_and_report_writes_every_part(tmp_path):
    root = _project(tmp_path)
    res = virtual.harnessc(root, "run", env=env(SERVICE_TOKEN=SECRET))
    assert res.returncode == 0, res.stdout + res.stderr
    line = res.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"report: `harnessc report` writes (\.harness/runs/([^/]+)/report\.html)", line)
    assert m, res.stdout
    assert not (root / m.group(1)).exists()  # run does not pay for the charts
    res = virtual.harnessc(root, "report", env=env(SERVICE_TOKEN=SECRET))
    assert res.returncode == 0 and res.stdout.strip() == f"report: {m.group(1)}", res.stdout + res.stderr
    page = (root / m.group(1)).read_text()
    # the summary, the charts (the plan, the timeline and its axis, cost and tokens), the tasks
    # with their verification and failures
    assert f"run {m.group(2)}" in page and "succeeded" in page and "cache share" in page
    assert page.count("<svg") == 4 and 'id="plan"' in page and 'id="timeline"' in page
    assert "worker" in page and "writer" in page  # the timeline's legend names the agents
    assert 'id="task-alpha"' in page and 'id="task-beta"' in page
    assert "accept <code>listing</code> (<code>" in page and "checked 3 files: ok" in page  # the accept tail
    assert "contract <b>summary</b>" in page
    assert "Failed attempts:" in page and "attempt 1 (worker, rejected" in page  # beta's first try
    # self-contained: no script, nothing fetched, and the token the agents printed is gone
    assert "<script" not in page and not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert SECRET not in page and "[redacted]" in page


def test_report_markdown_and_other_places(tmp_path):
    root = _project(tmp_path)
    assert virtual.harnessc(root, "run", env=env(SERVICE_TOKEN=SECRET)).returncode == 0
    res = virtual.harnessc(root, "report", "--format", "md", "--out", "-", env=env(SERVICE_TOKEN=SECRET))
    assert res.returncode == 0, res.stderr
    md = res.stdout
    assert md.startswith("## harnessc run ") and "| task | state |" in md and "| `beta` | succeeded |" in md
    assert "Full report: `harnessc report --run " in md  # no page yet: the command that writes it
    assert SECRET not in md
    assert virtual.harnessc(root, "report").returncode == 0
    md = virtual.harnessc(root, "report", "--format", "md", "--out", "-").stdout
    assert re.search(r"Full report: `\.harness/runs/[^/]+/report\.html`", md)
    out = tmp_path / "elsewhere.html"
    res = virtual.harnessc(root, "report", "--out", str(out))
    assert res.returncode == 0 and res.stdout.strip() == f"report: {out}" and out.read_text().startswith("<!DOCTYPE html>")
    res = virtual.harnessc(root, "report", "--run", "nope")
    assert res.returncode == 2 and "no run 'nope'" in res.stderr


def test_report_before_any_run_and_without_matplotlib(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a")])
    res = virtual.harnessc(root, "report")
    assert res.returncode == 2 and "nothing has run in this project yet" in res.stderr
    assert virtual.harnessc(root, "run").returncode == 0
    # a python where matplotlib cannot be imported (the demo installs the package alone): the
    # page has its tables and a line naming the extra; the command says so too
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib").mkdir()
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('not installed')\n")
    blocked = env(PYTHONPATH=f"{blocker}:{REPO}")
    res = harnessc(root, "report", env=blocked)
    assert res.returncode == 0 and "pip install 'harnessc[report]'" in res.stderr, res.stdout + res.stderr
    page = next((root / ".harness" / "runs").glob("*/report.html")).read_text()
    # the plan and the timeline are the page's own SVG; only the cost and token chart needs matplotlib
    assert "The cost and token charts are left out: they need matplotlib (pip install &#39;harnessc[report]&#39;)." in page
    assert 'class="plan-graph"' in page and 'class="timeline-rows"' in page and 'id="tasks"' in page
    assert "chart-spending" not in page and "<th>tokens</th>" in page  # the agents' table stays
    res = harnessc(root, "report", "--format", "md", "--out", "-", env=blocked)  # Markdown needs no charts
    assert res.returncode == 0 and res.stdout.startswith("## harnessc run ")
    # no agent has a price: no $0.0000 column, the summary says why there is no cost
    assert "| no price set |" in res.stdout and "| task | state | agent | attempts | tokens |\n" in res.stdout
    assert "$0.0000" not in res.stdout
    res = harnessc(root, "run", "--rerun", "all", env=blocked)  # the run itself is not affected
    assert res.returncode == 0 and "report: `harnessc report` writes .harness/runs/" in res.stdout


def test_big_run_markdown_fits_a_github_summary(tmp_path):
    from harnessc import runreport

    root = tmp_path / "big"
    write_big_run(root, tasks=2000, attempts=6000, error_chars=2000)
    md = runreport.render(root, fmt="md")
    assert len(md) <= 65_536
    assert "### Failures (200)" in md and md.count(" failed:\n\n```text\nrejected 3 times") == 200  # every failure kept
    assert "more tasks: see the full report." in md
    assert md.rstrip().endswith("`harnessc report --run 20260101T000000-1` writes it")
    page = runreport.write(root)
    assert page.stat().st_size <= 3 * 1024 * 1024
    md = runreport.render(root, fmt="md")
    assert md.rstrip().endswith("Full report: `.harness/runs/20260101T000000-1/report.html`")



def test_big_run_charts_name_what_they_show(tmp_path):
    """2,000 tasks in 20 waves (no phases): the timeline names every row; the plan is one box
    per wave with its counts, each linking to that wave's own graph; the bars name the
    costliest tasks and the token axis needs no offset text."""
    from harnessc.runreport import charts, data, svg

    root = tmp_path / "big"
    write_big_run(root, tasks=2000, attempts=6000)
    report = data.collect(root)
    colors = charts.agent_colors(list(report["agents"]))
    ids = {t["id"] for t in report["tasks"]}
    drawn = svg.timeline(report, colors, ids)
    rows = [t for t in _texts(drawn["rows"]) if t.startswith("t0")]
    assert rows == [t["id"] for t in report["tasks"]]  # every row, in plan order
    assert {"0s", "1h", "2h"} <= set(_texts(drawn["axis"]))  # the run took over four hours
    plan = svg.plan(report["tasks"], ids)
    assert plan["by"] == "wave" and [g["name"] for g in plan["groups"]] == [f"wave {n}" for n in range(20)]
    boxes = _texts(plan["svg"])
    assert "wave 0" in boxes and "100 tasks" in boxes and "90 succeeded, 10 failed" in boxes
    assert plan["svg"].count('<a href="#plan-') == 20
    assert [t for t in _texts(plan["groups"][3]["svg"]) if t.startswith("t0")] == [f"t{i:05d}" for i in range(300, 400)]
    spending = _texts(charts.spending(report, colors))
    costliest = sorted((t for t in report["tasks"] if t["attempts"]), key=lambda t: (-t["cost_usd"], -t["tokens"]))
    assert [t["id"] for t in costliest[:25]] == [t for t in spending if t.startswith("t0")][:25]
    assert {"sonnet", "haiku", "codex", "local"} <= set(spending)
    assert "cost (USD) by task (the 25 costliest of 2000)" in spending
    assert not any(t.startswith("1e") for t in spending)


def _texts(svg_text: str) -> list[str]:
    import html

    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg_text)]


def test_long_task_ids_and_agent_names_are_cut_in_the_charts(tmp_path):
    """Ids have no length limit; the axes sit right of the longest row name, so a name is cut
    in the middle rather than pushing the bars off the chart (that raised before)."""
    from harnessc.runreport import charts, data, svg

    root = tmp_path / "big"
    write_big_run(root, tasks=30, attempts=60)
    report = data.collect(root)
    for t in report["tasks"]:
        t["id"] = t["id"] + "-" + "W" * 150
    report["agents"] = {name + "-" + "W" * 100: figures for name, figures in report["agents"].items()}
    colors = charts.agent_colors(list(report["agents"]))
    for drawn in (svg.timeline(report, colors, set())["rows"], charts.spending(report, colors)):
        names = [t for t in _texts(drawn) if "W" in t]
        assert names and all(len(n) <= charts.LABEL_CHARS and "\u2026" in n for n in names)
        assert any(n.startswith("t00000-W") for n in names)


def test_a_failed_accept_check_shows_its_command_and_output_tail(tmp_path):
    """An accept command without an id fails: the report, `log` and the error name the command
    as typed (not `task-accept-1`, not only `'python3'`), with the end of what it printed."""
    root = tmp_path / "proj"
    check = "import sys; print('step 1 ok'); print('only 2 of 3 files checked'); sys.exit(4)"
    write_project(root, [node("gate", accept=[{"id": "task-accept-1", "argv": [sys.executable, "-c", check],
                                               "timeout": 60}], retry={"max_retries": 0})])
    assert virtual.harnessc(root, "run").returncode == 1
    command = shlex.join([sys.executable, "-c", check])
    assert virtual.harnessc(root, "report").returncode == 0
    page = next((root / ".harness" / "runs").glob("*/report.html")).read_text()
    failed = page[page.index("Failed attempts:"):]
    assert f"accept check failed: `{command}` exited with 4\nstep 1 ok\nonly 2 of 3 files checked" in failed
    assert "task-accept-1" not in page
    log = virtual.harnessc(root, "log", "gate").stdout
    assert f"--- check {sys.executable} -c " in log and "task-accept-1" not in log


def test_a_best_of_n_scoreboard_shows_in_show_and_the_report(tmp_path):
    """A real best-of-3 run (git worktrees, a score command): `show TASK` prints the scoreboard
    under the result (and --output json has it); the report has it in the task's section."""
    from .test_approaches import SCORE, project, run

    root = tmp_path / "p"
    project(root, {"score": {"1": "3", "2": "7.5", "3": "-1"}, "fail": ["3"]},
            {"select": "best", "score": {"id": "score", "argv": SCORE, "timeout": 60}}, retry={"max_retries": 0})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = virtual.harnessc(root, "show", "t")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("=== approaches"))
    assert "select best" in lines[head] and "score: " in lines[head]
    assert re.search(r"^\s+2\s+bot\s+yes\s+7\.5\s.*selected$", lines[head + 3]), lines
    assert re.search(r"^\s+3\s+bot\s+no\s", lines[head + 4]), lines
    data = __import__("json").loads(virtual.harnessc(root, "show", "t", "--output", "json").stdout)
    assert [a["selected"] for a in data["approaches"]["approaches"]] == [False, True, False]
    assert virtual.harnessc(root, "report").returncode == 0
    page = next((root / ".harness" / "runs").glob("*/report.html")).read_text()
    section = page[page.index('id="task-t"'):page.index("</details>", page.index('id="task-t"'))]
    assert "Approaches (best of 3, select best, score: <code>" in section
    rows = re.findall(r"<tr><td>(\d)</td><td>bot</td><td>(yes|no)</td><td class=\"n\">([^<]*)</td>.*?<td>(selected)?</td>",
                      section)
    assert rows == [("1", "yes", "3.0", ""), ("2", "yes", "7.5", "selected"), ("3", "no", "-", "")], rows


# ------------------------------------------------------------------ a run's text stays text

HOSTILE_STDERR = ("boom <!-- the rest of the summary is hidden\n"
                  "![x](http://evil.example/x.png) [link](http://evil.example) <script>alert(1)</script>\n"
                  "``````````\n"
                  "~~~~~~~~~~\n"
                  "www.evil.example mail@evil.example <b>bold</b> *em* _em_ | pipe\n")
HOSTILE_AGENT = "ev|il\nname <img src=x> [a](http://evil.example)"
MATH_AGENT = "$\\frac{a}$"


def _hostile_project(tmp_path: Path) -> Path:
    """Task `bad`: an agent with a hostile name fails, printing hostile Markdown/HTML to its
    stderr; task `ok`: an agent named like mathtext succeeds."""
    fail = tmp_path / "fail.py"
    fail.write_text(f"import sys\nsys.stdin.read()\nsys.stderr.write({HOSTILE_STDERR!r})\nsys.exit(3)\n")
    ok = tmp_path / "ok.py"
    ok.write_text("import json, sys\nsys.stdin.read()\nprint(json.dumps({'title': 'fine', 'score': 1}))\n")
    root = tmp_path / "proj"
    write_project(root, [node("bad", routing={"agent": HOSTILE_AGENT, "chain": []}, retry={"max_retries": 0}),
                         node("ok", contract="summary", routing={"agent": MATH_AGENT, "chain": []})],
                  agents={HOSTILE_AGENT: {"provider": "command", "command": [sys.executable, str(fail)]},
                          MATH_AGENT: {"provider": "command", "command": [sys.executable, str(ok)]}},
                  contracts={"summary": SIMPLE_CONTRACT})
    return root


def _tokens(tokens):
    for t in tokens:
        yield t
        yield from _tokens(t.children or ())


def test_md_report_holds_an_agents_text_as_text(tmp_path):
    """Rendered by a real CommonMark parser (raw HTML on, GFM tables): no link, image, raw HTML
    or comment anywhere; the agent's stderr whole inside a code block that its line of ten
    backticks does not close; the rest of the summary still there; a pipe and a newline in
    an agent's name stay in their cell."""
    from markdown_it import MarkdownIt

    root = _hostile_project(tmp_path)
    assert virtual.harnessc(root, "run").returncode == 1
    res = virtual.harnessc(root, "report", "--format", "md", "--out", "-")
    assert res.returncode == 0, res.stdout + res.stderr
    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    tokens = list(_tokens(parser.parse(res.stdout)))
    assert not [t.type for t in tokens if t.type in ("html_block", "html_inline", "link_open", "image")]
    (block,) = [t for t in tokens if t.type == "fence"]
    assert HOSTILE_STDERR in block.content  # every line, inside the fence
    page = parser.render(res.stdout)
    outside = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", "", page, flags=re.S)
    for live in ("<img", "<a ", "<!--", "<script", "<b>", "<em>", "http://", "www.", "@"):
        assert live not in outside, live
    assert "<h3>Tasks</h3>" in page and "Full report:" in outside  # nothing hidden after the error
    (bad_row,) = [row for row in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S) if "<td><code>bad</code>" in row]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", bad_row, flags=re.S)
    assert len(cells) == 5 and cells[2] == "<code>ev|il name &lt;img src=x&gt; [a](http://evil.example)</code>"


def test_report_draws_agent_names_as_text_and_the_page_escapes_them(tmp_path):
    """An agent named `$\\frac{a}$` (mathtext that does not parse) crashed `report`; its name
    is drawn as it is. The HTML page escapes every run text (Jinja autoescape, SVG text)."""
    root = _hostile_project(tmp_path)
    assert virtual.harnessc(root, "run").returncode == 1
    res = virtual.harnessc(root, "report")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    page = next((root / ".harness" / "runs").glob("*/report.html")).read_text()
    svg_texts = re.findall(r"<text[^>]*>([^<]*)</text>", page)
    assert MATH_AGENT in svg_texts  # the timeline's legend, as written
    assert "<img src=x>" not in page and "<script>alert" not in page and "<!-- the rest" not in page
    assert "&lt;img src=x&gt;" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("usetex", [False, True])
def test_charts_draw_hostile_names_as_shown_text(tmp_path, usetex):
    """Mathtext, a LaTeX setting from the caller's matplotlibrc, control characters, a
    right-to-left override, a very long name: each drawn as one line of plain text, its
    controls shown, and without a warning (no missing glyph)."""
    import warnings

    import matplotlib

    from harnessc.runreport import charts, data, svg

    root = tmp_path / "big"
    write_big_run(root, tasks=30, attempts=60)
    report = data.collect(root)
    names = [MATH_AGENT, "$x^$ \\sqrt{", "esc\x1b[31mred\x00nul rtl\u202eevil\u2066", "L" * 5000 + "$"]
    assert len(report["agents"]) == len(names)
    report["agents"] = dict(zip(names, report["agents"].values()))
    mapping = dict(zip({a["agent"] for t in report["tasks"] for a in t["attempts"]}, names))
    for t in report["tasks"]:
        for a in t["attempts"]:
            a["agent"] = mapping[a["agent"]]
        t["agent"] = mapping.get(t["agent"], t["agent"])
    report["tasks"][0]["id"] = "$\\frac{b}$"
    for n, t in enumerate(report["tasks"]):  # a phase heading is the roadmap's text too
        t["phase"] = "Phase 1: <b>bold</b> & \u202eevil" if n < 15 else "Phase 2"
    colors = charts.agent_colors(list(report["agents"]))
    with warnings.catch_warnings(), matplotlib.rc_context({"text.usetex": usetex}):
        warnings.simplefilter("error")
        svgs = [svg.plan(report["tasks"], set())["svg"], svg.timeline(report, colors, set())["rows"],
                charts.spending(report, colors)]
    texts = {t for drawn in svgs for t in _texts(drawn)}
    assert {MATH_AGENT, "$x^$ \\sqrt{", "esc^[[31mred^@nul rtl\\u202eevil\\u2066", "$\\frac{b}$"} <= texts
    assert not any(c in t for t in texts for c in "\x1b\x00\u202e\u2066")
    assert "Phase 1: <b>bold</b> & \\u202eevil (15)" in texts  # the timeline's group, as text
    assert not any("<b>" in drawn for drawn in svgs)
    assert any(t.startswith("LLLL") and t.endswith("L$") and len(t) <= charts.LABEL_CHARS for t in texts)


# ------------------------------------------------------------------ in a real browser

chromium = browser.chromium  # the fixture: one headless Chromium for this module's pages

def test_demo_report_in_headless_chromium(tmp_path, chromium):

    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))  # not a demo run's state
    res = virtual.harnessc(root, "run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert virtual.harnessc(root, "report").returncode == 0
    page = next((root / ".harness" / "runs").glob("*/report.html"))
    seen = load_page(chromium, page)
    assert seen.console_errors == [] and seen.requests == [], (seen.console_errors, seen.requests)
    # the charts are drawn: inside each chart's box, the colours it draws with are on screen
    from .browser import colours_in

    expected = {"plan": "#2e9e44", "timeline": "#4c78a8", "spending": "#f58518"}  # succeeded; rehearsal; careful
    for chart, colour in expected.items():
        box = seen.boxes[chart]
        assert box["width"] > 300 and box["height"] > 100, (chart, box)
        assert colours_in(seen.png, box).get(colour, 0) > 200, chart
    # run memory: the decision market-001 recorded, tied to its task, between the alerts and the tasks
    assert seen.headings["alerts"] < seen.headings["memory"] < seen.headings["tasks"], seen.headings
    memory = [t["text"] for t in seen.texts if t["shown"] and seen.headings["memory"] < t["y"] < seen.headings["tasks"]]
    assert "market-001" in memory and any("EUR" in t for t in memory), memory
    shot = REPO / "docs" / "report.png"
    if __import__("os").environ.get("HARNESSC_UPDATE_GOLDEN") == "1":
        from .browser import save_small

        save_small(seen.png, shot, height=int(seen.headings["tasks"]) + 120)  # down to the first tasks


@pytest.mark.parametrize("size", ["demo", "236 tasks in 12 phases", "621 tasks, no phases, 385 done"])
def test_report_reads_at_every_size_in_headless_chromium(tmp_path, size, chromium):
    """The demo, a 236-task run in phases and a 621-task plan without phases (an import's
    shape: 385 done, the rest run), run on the simulate agent and shown in Chromium: every
    task that ran has its row in the timeline, the plan names every task (up to 60) or every
    phase, and every text on the page - SVG labels too, at their scale on screen - is at
    least 11 px; a phase's box opens its tasks; the page stays under 3 MB."""
    root = tmp_path / "p"
    if size == "demo":
        shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))  # not a demo run's state
    elif size.startswith("236"):
        write_big_roadmap(root, 236, phases=12)
    else:
        write_big_roadmap(root, 621, done=0.62)
    res = virtual.harnessc(root, "run")
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert virtual.harnessc(root, "report").returncode == 0
    page = next((root / ".harness" / "runs").glob("*/report.html"))
    assert page.stat().st_size < 3_000_000
    seen = load_page(chromium, page)
    (tmp_path / "report.png").write_bytes(seen.png)  # to look at: pytest --basetemp=DIR
    assert seen.console_errors == [] and seen.requests == [], (seen.console_errors, seen.requests)
    small = [t for t in seen.texts if t["px"] < 11]
    assert not small and len(seen.texts) > 50, small[:5]

    from harnessc.runreport import data

    report = data.collect(root)
    ran = [t["id"] for t in report["tasks"] if t["attempts"]]
    shown = {where: [t["text"] for t in seen.texts if t["where"] == where and t["shown"]]
             for where in ("plan", "timeline", "spending", "phase")}
    assert [t for t in shown["timeline"] if t in set(ran)] == ran  # every row named, in plan order
    planned = [t["id"] for t in report["tasks"]]
    if len(planned) <= 60:
        assert set(planned) <= set(shown["plan"])
    else:
        phases = [f"Phase {n}: Part {n} of the work" for n in range(1, 13)] if "12 phases" in size else \
            [f"wave {n}" for n in range(max(t["wave"] for t in report["tasks"]) + 1)]
        assert phases == [t for t in shown["plan"] if t.startswith(("Phase", "wave"))]
        assert f"{len(planned)} tasks by " in page.read_text()
        assert shown["phase"] == []  # each phase's own graph waits for its link
        opened = load_page(chromium, page, fragment="plan-2")
        second = [t["text"] for t in opened.texts if t["where"] == "phase" and t["shown"]]
        members = [t["id"] for t in report["tasks"] if (t["phase"] == phases[1] if "12 phases" in size
                                                         else t["wave"] == 1)]
        assert set(members) <= set(second) and all(t["px"] >= 11 for t in opened.texts if t["shown"])
    assert "tokens by agent" in shown["spending"]
    if size != "demo":  # no price set: tokens, never an empty cost chart, and the page says so
        assert not any("cost" in t or t.startswith(("-", "\u2212")) for t in shown["spending"]), shown["spending"]
        assert "tokens by task (the 25 with the most tokens of" in " ".join(shown["spending"])
        assert "No price is set for these agents: the charts show tokens" in page.read_text()


def test_pre_text_shows_controls_and_bidi_overrides_instead_of_obeying_them():
    from harnessc.runreport.html import _pre_text

    shown = str(_pre_text("ok <b>\n\x1b[31mred \u202eevil\u2066"))
    assert shown == "ok &lt;b&gt;\n^[[31mred \\u202eevil\\u2066"
