"""A loop task between iterations: what it carries (loop.py), its progress meter (progress.py,
files.py, attribution.py), stuck detector (stuck.py), memory (memory.py), recovery ladder
(recovery.py, assist.py) and the run flags over its settings (loopflags.py)."""
