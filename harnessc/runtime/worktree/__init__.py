"""Git in a run: a commit per succeeded task (`git: commit`, gitops.py), and isolated work
(`isolation: worktree`): each attempt in its own git worktree, verified changes landing as
one commit each on the run's integration branch.

* worktrees.py - an attempt's worktree and ref: create, its change (base against the final
  tree, whatever the agent committed) and its commit, remove, reconcile;
* pool.py - a run's reused checkouts;
* commitmsg.py - the messages of harnessc's commits: the subject, passed by file;
* landing.py - the integration branch, merge and re-check, the user's fast-forward;
* tripwire.py - the shared git directory recorded; what agents change there put back;
* isolation.py - what a run asks of them (the Runner holds one `Isolation`).

Below both halves (lint checks the repository too): harnessc/gitcmd.py, through which every
git process starts, and harnessc/gitrepo.py, the repository checks (a branch, a commit, no
submodules or LFS).
"""
