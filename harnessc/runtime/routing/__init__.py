"""Which agent serves a call, and whether it may be made: the router (router.py) over agent
health (health.py) and history (history.py), adaptive concurrency (throttle.py), and the
limits checked before every call (budget.py, tasklimits.py, callbounds.py)."""
