"""harnessc: compile agent work written as specs into a checked plan, and run it."""

__version__ = "0.1.0"
