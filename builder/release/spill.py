"""Moved to generation/spill.py (generation must not import builder); this name is that same module, so callers and
tests that patch its constants keep working."""
import sys; from generation import spill as _spill; sys.modules[__name__] = _spill  # noqa: E401,E702
