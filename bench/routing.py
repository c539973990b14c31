"""Routing benchmark: what `routing.default: auto` saves, against fixed strategies.

    python bench/routing.py [--tasks 300] [--seed 1]

A generated workload of --tasks tasks (the mix of complexities is COMPLEXITY_MIX, each task
with the contract `summary`) runs under four strategies with the same four simulate agents
(AGENTS: tier, price per million tokens, skill = chance an attempt answers validly, by
complexity). Each strategy is a fresh project run by the real CLI:

* strongest  - routing.default: large
* cheapest   - routing.default: tiny
* static     - routing.by_complexity: trivial/simple -> small, medium -> mid, complex/epic -> large
* auto       - routing.default: auto, escalation [tiny, small, mid, large], on_failure: escalate

Every task may retry twice (max_retries 2). Reported per strategy: tasks verified (%), cost
(USD, from the agents' prices), calls (attempts) and wall time. Target: auto >= 99% of
strongest's success rate at <= 40% of its cost.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harnessc_env  # bench/: this script's directory

REPO = Path(__file__).resolve().parents[1]
HARNESSC = [sys.executable, "-c", "from harnessc.cli import main; main()"]

COMPLEXITY_MIX = {"trivial": 0.25, "simple": 0.30, "medium": 0.25, "complex": 0.15, "epic": 0.05}
AGENTS = {  # name: (tier, input $/M, output $/M, skill by complexity)
    "tiny": ("fast", 0.15, 0.6, {"trivial": 0.97, "simple": 0.90, "medium": 0.55, "complex": 0.25, "epic": 0.10}),
    "small": ("fast", 0.5, 2.0, {"trivial": 0.99, "simple": 0.96, "medium": 0.75, "complex": 0.45, "epic": 0.20}),
    "mid": ("balanced", 3.0, 15.0, {"trivial": 0.99, "simple": 0.99, "medium": 0.95, "complex": 0.80,
                                    "epic": 0.50}),
    "large": ("powerful", 15.0, 75.0, {"trivial": 0.99, "simple": 0.99, "medium": 0.98, "complex": 0.95,
                                       "epic": 0.85}),
}
STRATEGIES = {
    "strongest": "  default: large\n",
    "cheapest": "  default: tiny\n",
    "static": "  default: auto\n  by_complexity: {trivial: small, simple: small, medium: mid, complex: large, "
              "epic: large}\n",
    "auto": "  default: auto\n  escalation: [tiny, small, mid, large]\n  max_fallbacks: 3\n",
}
CONTRACTS = """\
contracts:
  summary:
    description: A short summary
    output:
      title: {type: str, description: The title, rules: ["len(value) >= 3"], example: "A title"}
      points: {type: list, items: str, description: Key points, rules: ["len(value) >= 1"], example: ["one"]}
"""


def project(root: Path, strategy: str, tasks: int, seed: int) -> None:
    rng = random.Random(seed)
    levels = list(COMPLEXITY_MIX)
    weights = list(COMPLEXITY_MIX.values())
    lines = ["# Routing benchmark", "", "A generated workload.", "", "## Tasks", "", "### Phase 1: Work", ""]
    for i in range(tasks):
        level = rng.choices(levels, weights)[0]
        lines += [f"- [ ] **task-{i:04d}**: Summarise item {i}", f"  - complexity: {level}", "  - contract: summary",
                  ""]
    (root / "roadmap.md").write_text("\n".join(lines), encoding="utf-8")
    (root / "contracts.yaml").write_text(CONTRACTS, encoding="utf-8")
    on_failure = "escalate" if strategy == "auto" else "retry"
    agents = "".join(
        f"  {name}: {{provider: simulate, tier: {tier}, seed: {seed}, price: {{input: {pin}, output: {pout}}},"
        f" skill: {json.dumps(skill)}}}\n" for name, (tier, pin, pout, skill) in AGENTS.items())
    (root / "harness.yaml").write_text(
        f"agents:\n{agents}routing:\n{STRATEGIES[strategy]}"
        f"defaults: {{max_retries: 2, retry_delays: [0], on_failure: {on_failure}}}\nconcurrency: 8\n",
        encoding="utf-8")


def measure(strategy: str, tasks: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="hc-route-") as d:
        root = Path(d)
        project(root, strategy, tasks, seed)
        build = subprocess.run([*HARNESSC, "-C", d, "build"], capture_output=True, text=True)
        if build.returncode:
            raise SystemExit(f"{strategy}: build failed:\n{build.stdout}{build.stderr}")
        t0 = time.perf_counter()
        run = subprocess.run([*HARNESSC, "-C", d, "run"], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if run.returncode not in (0, 1):  # 1: some tasks failed, which is what is measured
            raise SystemExit(f"{strategy}: `harnessc run` exited {run.returncode}:\n{run.stderr or run.stdout}")
        status = json.loads(subprocess.run([*HARNESSC, "-C", d, "status", "--output", "json"],
                                           capture_output=True, text=True).stdout)
    rows = status["tasks"]
    ok = sum(t["state"] == "succeeded" for t in rows)
    return {"strategy": strategy, "verified": ok / len(rows), "cost": sum(t["cost_usd"] for t in rows),
            "calls": sum(t["attempts"] for t in rows), "wall": wall}


def main() -> None:
    harnessc_env.require()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    results = {s: measure(s, args.tasks, args.seed) for s in STRATEGIES}
    print(f"{args.tasks} tasks, mix {COMPLEXITY_MIX}, seed {args.seed}")
    print(f"{'strategy':<10} {'verified':>9} {'cost $':>10} {'calls':>6} {'wall s':>7}")
    for r in results.values():
        print(f"{r['strategy']:<10} {r['verified']:>8.1%} {r['cost']:>10.4f} {r['calls']:>6} {r['wall']:>7.2f}")
    strong, auto = results["strongest"], results["auto"]
    quality = auto["verified"] / strong["verified"] if strong["verified"] else 0.0
    share = auto["cost"] / strong["cost"] if strong["cost"] else 0.0
    print(f"auto vs strongest: {quality:.1%} of its success rate (target >= 99%) at {share:.1%} of its cost"
          f" (target <= 40%)")


if __name__ == "__main__":
    main()
