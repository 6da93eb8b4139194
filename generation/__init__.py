"""Stages that regenerate the Researchy Questions sub-question judgments, shard by shard."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("researchy-subq-judgments")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"
