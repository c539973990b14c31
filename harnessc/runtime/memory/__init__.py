"""Run memory (`.harness/memory/`): what one task learns reaches the others, across tasks and
runs. store.py keeps the entries (decisions, failures, constraints, the running summary);
capture.py reads them from an agent's text (markers) and a contract's output (fields);
summary.py refreshes the running summary; recall.py picks and renders a task's memory section
within its token budget; run.py is a run's hold on it (RunMemory). This package imports
nothing: `harnessc show` reads recall.py without loading the run's half."""

