"""Every process harnessc starts: how it runs, with its environment and output scrubbed of
secrets (procs.py), and how it ends with its command, run or harnessc (reaper.py, prctl.py)."""
