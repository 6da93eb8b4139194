"""The options more than one command takes, declared once as builder/command_options.py fields: `Sharding`, the record
of --shard and --num-shards that the sharded commands take after their own options; `shard_option` and
`num_shards_option` for a record that places them among its own (`corpus`); `profile_option`, the required --profile
of the stage commands and `plan`; `input_field`, a folder a stage reads, with the help its declaration gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from builder.command_options import REQUIRED, option
from generation.profiles.profile import bundled_profiles
from generation.stages import Stage


def input_field(stage_class: type[Stage], name: str) -> Any:
    """The required --NAME option of a folder `stage_class` reads, with the help its declaration gives."""
    given = next(i for i in stage_class.reads if i.option == name)
    return option(REQUIRED, f"--{name}", help=given.help)


def shard_option() -> Any:
    return option(0, "--shard", min=0, help="this worker's shard (0-based); with --num-shards, e.g. a Slurm array rank")


def num_shards_option() -> Any:
    return option(1, "--num-shards", min=1, help="how many shards the stage is cut into")


def profile_option() -> Any:
    return option(
        REQUIRED,
        "--profile",
        help=f"a bundled profile ({', '.join(bundled_profiles())}) or a YAML "
        "file (a .yaml path, or any path with a folder in it)",
    )


@dataclass(frozen=True, kw_only=True)
class Sharding:
    """Which shard of how many this run works on (builder/cli/support.py `shard_of` makes the `Shard`)."""

    shard: int = shard_option()
    num_shards: int = num_shards_option()
