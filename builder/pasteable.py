"""Commands the kit prints for a person to paste: they must run as printed in a fresh shell (no venv activated), from
the folder the printing command ran in. So they name this environment's own executables (`.venv/bin/researchy-subq`,
`.venv/bin/python`), and a profile that is not a bundled one as a YAML file written beside the outputs."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import yaml

from generation.profiles.profile import Profile, bundled_profiles, load_profile
from generation.storage.atomic_files import write_text_atomic

KIT = "researchy-subq"


def executable(name: str) -> str:
    """`name` from this interpreter's environment (its bin/ folder), as a path a fresh shell runs: relative when it is
    under the current folder (`.venv/bin/researchy-subq`), absolute otherwise. The interpreter's path is not resolved:
    a venv's python is a link out of the venv, and only the link finds the venv's packages."""
    bin_folder = Path(os.path.abspath(sys.executable)).parent
    path = bin_folder / name
    if not path.exists():
        if name == KIT:  # run from a source tree without the console script
            return f"{executable(Path(sys.executable).name)} -m builder.cli.main"
        path = Path(os.path.abspath(sys.executable))
    return shown_path(path)


def shown_path(path: Path) -> str:
    """`path` as a shell word from the current folder: relative under it (`./x`, `.venv/bin/x`), absolute otherwise."""
    path, here = Path(os.path.abspath(path)), Path.cwd()
    shown = os.path.relpath(path, here) if path.is_relative_to(here) else str(path)
    return shlex.quote(shown if "/" in shown else f"./{shown}")


def kit_command(command: str) -> str:
    """A `researchy-subq ...` line with this environment's researchy-subq in front."""
    if command == KIT or command.startswith(f"{KIT} "):
        return executable(KIT) + command[len(KIT) :]
    return command


def python_command(code: str) -> str:
    return f"{executable('python')} -c {shlex.quote(code)}"


def profile_argument(profile: Profile, folder: Path) -> str:
    """What `--profile` takes to mean `profile`: its bundled name when it is the bundled profile unchanged, else a YAML
    file written under `folder` (a derived profile, as the demo makes) that loads back to the same profile."""
    if profile.name in bundled_profiles() and load_profile(profile.name) == profile:
        return profile.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{profile.name}.yaml"
    write_text_atomic(
        path,
        f"# {profile.description}\n"
        + yaml.safe_dump(profile.model_dump(), sort_keys=False, allow_unicode=True, width=10_000),
    )
    if load_profile(path) != profile:
        raise AssertionError(f"{path}: does not load back to the profile it was written from")
    return str(path)
