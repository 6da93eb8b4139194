"""Judging: prompts, parsers, the judges that put them around a backend, and the cost plan."""
