"""Context by retrieval: `context: auto` / `auto(N)` (compiler/retrieval.py), through real
builds of small generated repositories, and lint of the entry's forms through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harnessc import planfile
from harnessc.compiler import compile_project
from harnessc.compiler.contextentry import auto_entry
from harnessc.compiler.retrieval import MAX_FILE_BYTES
from inproc import harnessc as in_process

REPO = Path(__file__).resolve().parents[1]

DECOYS = {  # files about other things: the right one must win by its symbols
    "src/shop/cart.py": "class Cart:\n    def add_item(self, item):\n        self.items.append(item)\n",
    "src/shop/orders.py": "from shop.cart import Cart\n\ndef place_order(cart):\n    return Cart()\n",
    "src/shop/users.py": "def create_user(name):\n    return {'name': name}\n",
    "src/shop/__init__.py": "",
    "docs/guide.md": "# Guide\n\nThe cart holds items; orders are placed from a cart.\n",
    "web/app.js": "function renderCart(cart) {\n  return cart.items.length;\n}\n",
}
PRICING = "TAX = 0.2\n\n\ndef apply_discount(price, rate):\n    return round(price * (1 - rate), 2)\n"


def harnessc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`harnessc ARGS` from `cwd`, in this process (tests/inproc.py)."""
    return in_process(*args, cwd=cwd)


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def roadmap(root: Path, *tasks: str) -> None:
    (root / "roadmap.md").write_text("# P\n\n## Tasks\n\n" + "".join(tasks))


def task(tid: str, title: str, context: str, *, accept: str = "true", more: str = "") -> str:
    return f"- [ ] **{tid}**: {title}\n  - accept: {accept}\n  - context: {context}\n{more}"


def built(root: Path):
    project = compile_project(root)
    assert project.plan is not None, [str(d) for d in project.diags.items]
    return {n.id: n for n in project.plan.nodes}


def auto_files(node) -> list[str]:
    return [f.path for f in node.context_staging.files if f.priority == "auto"]


@pytest.mark.parametrize("entry, expected", [
    ("auto", (True, None, None)),
    ("AUTO", (True, None, None)),
    ("auto(4000)", (True, 4000, None)),
    (" auto ( 12 ) ", (True, 12, None)),
    ("src/auto.py", (False, None, None)),
    ("./auto", (False, None, None)),
])
def test_auto_entry_forms(entry, expected):
    assert auto_entry(entry) == expected


@pytest.mark.parametrize("entry", ["auto()", "auto(x)", "auto(0)", "auto(-3)", "auto (high)", "auto(1.5)"])
def test_bad_auto_forms_are_told(entry):
    is_auto, tokens, wrong = auto_entry(entry)
    assert is_auto and tokens is None and wrong


def test_the_file_defining_the_goals_symbol_is_chosen_with_why(tmp_path):
    write(tmp_path, {**DECOYS, "src/shop/pricing.py": PRICING})
    roadmap(tmp_path, task("t1", "Round the result of apply_discount to cents", "auto"))
    node = built(tmp_path)["t1"]
    assert auto_files(node)[0] == "src/shop/pricing.py"
    assert node.context[0] == "src/shop/pricing.py"  # in the prompt's context
    first = node.context_staging.files[0]
    assert isinstance(first, planfile.RetrievedFile) and "apply_discount" in first.matched and first.score > 0
    auto = node.context_staging.auto
    assert auto.asked is None and auto.budget == node.context_staging.budget and "apply_discount" in auto.words
    assert auto.indexed == len(DECOYS) + 1  # roadmap.md is a spec, not project code
    compile_project(tmp_path, write_prompts=True)
    text = (tmp_path / ".harness" / "build" / "prompts" / "t1.md").read_text()
    assert "### src/shop/pricing.py" in text and "def apply_discount" in text


def test_the_module_a_named_test_imports_is_chosen(tmp_path):
    """The accept command names the test; the module under test is what the test imports
    (the goal names neither)."""
    write(tmp_path, {**DECOYS, "src/shop/pricing.py": PRICING,
                     "tests/test_money.py": "from shop.pricing import apply_discount as d\n\n"
                                            "def test_half():\n    assert d(10, 0.5) == 5\n"})
    roadmap(tmp_path, task("t1", "Make the money tests pass", "auto", accept="pytest tests/test_money.py::test_half"))
    node = built(tmp_path)["t1"]
    files = node.context_staging.files
    assert [f.path for f in files[:2]] == ["tests/test_money.py", "src/shop/pricing.py"]
    assert "imported by tests/test_money.py" in files[1].matched


def test_named_files_come_first_and_auto_stays_within_its_budget(tmp_path):
    big = {f"src/shop/discount_{i}.py": f"def apply_discount_{i}(p):\n    return p  # apply_discount\n" + "#" * 400
           for i in range(10)}
    write(tmp_path, {**DECOYS, **big, "src/shop/pricing.py": PRICING, "notes.md": "n" * 2000})
    roadmap(tmp_path,
            task("t1", "Fix apply_discount", "notes.md, auto(300)"),
            task("t2", "Fix apply_discount", "notes.md, auto", more="  - context_tokens: 700\n"),
            task("t3", "Fix apply_discount", "notes.md, auto(5000)", more="  - context_tokens: 600\n"))
    nodes = built(tmp_path)
    for tid, budget in (("t1", 300), ("t2", 200), ("t3", 100)):  # t2, t3: what notes.md (500) left
        staging = nodes[tid].context_staging
        assert staging.files[0].path == "notes.md" and nodes[tid].context[0] == "notes.md"
        assert staging.auto.budget == budget, tid
        chosen = [f for f in staging.files if f.priority == "auto"]
        assert chosen and sum(f.tokens for f in chosen) == staging.auto.used <= budget, tid
        assert staging.used == 500 + staging.auto.used <= staging.budget
        assert "notes.md" not in auto_files(nodes[tid])  # named: never twice


def test_binary_huge_and_linked_files_are_never_chosen_nor_read(tmp_path):
    outside = tmp_path / "outside"
    write(outside, {"secret.py": "def apply_discount():\n    return 'SECRET'\n",
                    "pkg/leak.py": "def apply_discount():\n    return 'SECRET'\n"})
    root = tmp_path / "project"
    write(root, {**DECOYS,
                 "blob.bin": b"apply_discount\0" * 50,
                 "latin.txt": "apply_discount caf\xe9".encode("latin-1"),  # not UTF-8
                 "huge.py": "def apply_discount():\n    pass\n" + "#" * (MAX_FILE_BYTES + 10),
                 "src/shop/pricing.py": PRICING})
    (root / "link.py").symlink_to(outside / "secret.py")
    (root / "linked_dir").symlink_to(outside / "pkg")
    os.mkfifo(root / "pipe.py")  # opening it would block the build
    roadmap(root, task("t1", "Fix apply_discount", "auto"))
    node = built(root)["t1"]
    assert auto_files(node) == ["src/shop/pricing.py"]
    assert node.context_staging.auto.indexed == len(DECOYS) + 1


def test_no_supported_file_builds_with_nothing_chosen(tmp_path):
    write(tmp_path, {"a.bin": b"\0\1\2" * 100, "b.png": b"\x89PNG\0\0" * 10})
    roadmap(tmp_path, task("t1", "Fix apply_discount", "auto(1000)"))
    node = built(tmp_path)["t1"]
    assert list(node.context) == [] and list(node.context_staging.files) == []
    assert node.context_staging.auto.used == 0 and node.context_staging.auto.indexed == 0


def test_gitignored_files_are_left_out(tmp_path):
    write(tmp_path, {**DECOYS, "src/shop/pricing.py": PRICING, ".gitignore": "build/\n",
                     "build/lib/shop/pricing.py": PRICING})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    (tmp_path / "src" / "shop" / "untracked_pricing.py").write_text("def apply_discount_v2(): pass\n")
    roadmap(tmp_path, task("t1", "Fix apply_discount and apply_discount_v2", "auto"))
    chosen = auto_files(built(tmp_path)["t1"])
    assert "src/shop/pricing.py" in chosen and "src/shop/untracked_pricing.py" in chosen  # untracked: there
    assert not any(p.startswith("build/") for p in chosen)


def test_a_project_in_a_repositorys_subdirectory_follows_the_top_gitignore(tmp_path):
    root = tmp_path / "sub"
    write(root, {**DECOYS, "src/shop/pricing.py": PRICING, "out/pricing_copy.py": PRICING})
    (tmp_path / ".gitignore").write_text("sub/out/\n")
    subprocess.run(["git", "-C", str(tmp_path), "init", "-q"], check=True)
    roadmap(root, task("t1", "Fix apply_discount", "auto"))
    chosen = auto_files(built(root)["t1"])
    assert chosen[0] == "src/shop/pricing.py" and not any(p.startswith("out/") for p in chosen)


def test_two_builds_write_the_same_plan(tmp_path):
    write(tmp_path, {**DECOYS, "src/shop/pricing.py": PRICING,
                     **{f"src/m{i}.py": f"def helper_{i}():\n    apply_discount = {i}\n" for i in range(30)}})
    roadmap(tmp_path, *(task(f"t{i}", f"Fix apply_discount in case {i}", "auto(400)") for i in range(5)))
    plans = []
    for _ in range(2):
        result = harnessc("build", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        plans.append((tmp_path / ".harness" / "build" / "plan.json").read_bytes())
    assert plans[0] == plans[1]
    nodes = json.loads(plans[0])["nodes"]
    assert all(n["context_staging"]["auto"]["used"] <= 400 for n in nodes)
    loaded = planfile.loads(plans[0].decode()).nodes[0].context_staging
    assert isinstance(loaded, planfile.AutoStaging) and isinstance(loaded.files[0], planfile.RetrievedFile)
    assert loaded == nodes[0]["context_staging"]
    shown = harnessc("ls", cwd=tmp_path)
    assert shown.returncode == 0 and "t0: context auto chose" in shown.stdout and "apply_discount" in shown.stdout
    listed = json.loads(harnessc("ls", "--output", "json", cwd=tmp_path).stdout)
    assert listed[0]["context_auto"]["files"][0]["path"] == loaded.files[0].path
    shown = harnessc("show", "t0", cwd=tmp_path)  # the same record, for one task
    assert shown.returncode == 0 and "t0: context auto chose" in shown.stdout, shown.stdout + shown.stderr
    assert f"  {loaded.files[0].path}  score " in shown.stdout
    one = json.loads(harnessc("show", "t0", "--output", "json", cwd=tmp_path).stdout)
    assert one["context_auto"] == listed[0]["context_auto"]


def test_lint_reads_auto_forms_and_points_at_bad_ones(tmp_path):
    write(tmp_path, {"src/a.py": "x = 1\n"})
    roadmap(tmp_path, task("t1", "One", "auto"), task("t2", "Two", "src/a.py (high), auto(4000)"))
    result = harnessc("lint", cwd=tmp_path)
    assert result.returncode == 0 and "HC406" not in result.stdout, result.stdout  # no file named auto
    roadmap(tmp_path, task("t1", "One", "src/a.py, auto(lots)"), task("t2", "Two", "auto, auto(2000)"),
            task("t3", "Three", "auto(0)"))
    result = harnessc("lint", cwd=tmp_path)
    assert result.returncode != 0
    assert "roadmap.md:7:24: error[HC490]: bad context entry 'auto(lots)'" in result.stdout, result.stdout
    assert "roadmap.md:10:20: error[HC491]" in result.stdout
    assert "roadmap.md:13:14: error[HC490]" in result.stdout and "at least 1 token" in result.stdout


def test_the_bench_skips_cleanly_without_its_repository(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "bench" / "retrieval.py"), "--repo", str(tmp_path / "none")],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0 and "skipped: no repository at" in result.stdout, result.stdout + result.stderr


def test_lint_never_indexes(tmp_path):
    """Retrieval is build's: lint of a project with `context: auto` does not load it."""
    write(tmp_path, {**DECOYS, "src/shop/pricing.py": PRICING})
    roadmap(tmp_path, task("t1", "Fix apply_discount", "auto(500)"))
    script = ("import sys\nfrom harnessc.cli import cli\ntry:\n    cli.main(['lint'], standalone_mode=False)\n"
              "except SystemExit:\n    pass\nprint('harnessc.compiler.retrieval' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.stdout.splitlines()[-1] == "False", result.stdout + result.stderr
