"""The scripts of scripts/."""
