"""Profiles: the `Profile` model, its sections, its loading and reference; the built-in YAML files in builtin/."""
