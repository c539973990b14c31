"""Agents: one interface (base.Request -> base.Response | base.AgentError), one module per provider."""

from .base import Agent, AgentError, Request, Response, Usage, make_agent

__all__ = ["Agent", "AgentError", "Request", "Response", "Usage", "make_agent"]
