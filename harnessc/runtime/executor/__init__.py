"""Where an attempt runs: local or on a Ray cluster."""
