"""Agents: one interface (base.Request -> base.Response | base.AgentError), one module per provider.

The package imports nothing itself: the store reads usage.py's records and `status` reads
errors through them without loading the agents (base.py, the providers' modules)."""
