"""What a run keeps on disk: .harness/state.db (state.py; its tables in schema.py), the
run lock (lock.py), task results (outputs.py), best-of-N scoreboards (scoreboard.py), and
what `reset` and `clean` forget (reset.py, clean.py)."""
