"""harnessc's commands, one module per area (spec, importing, running, steering, state), and
what they share (common.py). cli.py imports a module when one of its commands is used."""
