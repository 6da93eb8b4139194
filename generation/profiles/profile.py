"""Profiles: YAML files holding every protocol knob, validated strictly.

`paper` follows the paper's text (Ju et al., arXiv:2510.21733), `crux-code` the authors' released code, `demo` runs on
the bundled sample on a CPU. A profile is a bundled name, or a path when it looks like one (a .yaml/.yml
suffix or a folder separator), so a folder named `demo` in the working directory never shadows `demo`.
Strict: no coercion (`k1: true`, `depth: "100"`), no infinities or NaN, no duplicate keys, no unknown keys.
A profile file may start from another (`base: paper`, a bundled name or a path relative to the file) and give only
the keys it changes; `with_overrides` sets single keys (`judge.prompt=crux-paper-document-first`) from a command line.

This module holds `Profile`, its config hash and the loading (YAML, the bundled names, the errors); the models of
its sections are in generation/profiles/sections.py and generation/profiles/release_sections.py, and are
imported from here as before.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, model_validator

from generation.profiles.release_sections import BanditSettings, Complexity, TrainingConfigsSettings, TrainSettings
from generation.profiles.sections import (
    BM25,
    JudgeConfig,
    OpenAIServer,
    Pool,
    Rerank,
    Strict,
    TransformersSettings,
)

PROFILE_DIR = Path(__file__).parent / "builtin"


class Profile(Strict):
    name: str = Field(description="the profile's name, in outputs, the manifest and the card")
    description: str = Field(description="one line on what the profile is for (`researchy-subq profiles` lists it)")
    bm25: BM25 = Field(description="BM25 retrieval")
    rerank: Rerank = Field(description="the reranker")
    pool: Pool = Field(description="the candidate pool")
    judge: JudgeConfig = Field(description="the judge")
    complexity: Complexity = Field(default=Complexity(), description="retrieval complexity (the card's analysis)")
    bandit: BanditSettings = Field(
        default=BanditSettings(), description="budgeted judging (`judge --budget`, `simulate`)"
    )
    training: TrainingConfigsSettings = Field(
        default=TrainingConfigsSettings(), description="the release's training configs and dev split"
    )
    train: TrainSettings = Field(
        default=TrainSettings(), description="fine-tuning a bi-encoder on the release (`train`)"
    )

    @model_validator(mode="after")
    def _negatives_below_answers(self):
        if self.training.negative_level >= self.complexity.answer_level:
            raise ValueError(
                f"training.negative_level ({self.training.negative_level}) must be below "
                f"complexity.answer_level ({self.complexity.answer_level}): a negative is never a positive"
            )
        return self

    def config_hash(self, *sections: str) -> str:
        """A stable hash of the named sections (all when none), for refusing to mix shards. The transformers
        backend's batching and placement settings are left out: they change how fast, not what (a run that ran
        out of memory resumes under a smaller `max_batch_tokens` with its chunks kept); so are the openai
        server's address, key variable, concurrency, timeout and retries (OpenAIServer.NOT_HASHED), and the judge's vLLM
        `engine_args`, for the same reason (a smaller `gpu_memory_utilization` or `max_num_seqs`)."""
        execution_only = set(TransformersSettings.model_fields)
        judge_only: dict[str, bool | set[str]] = {
            **dict.fromkeys(execution_only, True),
            "openai": set(OpenAIServer.NOT_HASHED),
        }
        data = self.model_dump(
            include=set(sections) if sections else None,
            exclude={"judge": {**judge_only, "engine_args": True}, "rerank": execution_only},
        )
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class ProfileError(ValueError):
    pass


def bundled_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def looks_like_path(name: str | Path) -> bool:
    text = str(name)
    return isinstance(name, Path) or Path(text).suffix in {".yaml", ".yml"} or "/" in text or os.sep in text


def profile_path(name_or_path: str | Path) -> Path:
    if looks_like_path(name_or_path):
        path = Path(name_or_path)
        if not path.is_file():
            raise ProfileError(f"{path}: no such profile file" if not path.exists() else f"{path}: not a file")
        return path
    bundled = PROFILE_DIR / f"{name_or_path}.yaml"
    if not bundled.exists():
        raise ProfileError(
            f"no bundled profile {name_or_path!r} (bundled: {', '.join(bundled_profiles())}); "
            "a profile file needs a .yaml suffix or a path with a folder, e.g. ./mine.yaml"
        )
    return bundled


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load keeps the last of two equal keys; a profile with both is an error."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, UniqueKeyLoader.construct_mapping)


def read_profile_data(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """The profile file's mapping, merged over its `base` profile's (recursively) when it names one."""
    try:
        with open(path, encoding="utf-8") as f:  # from a file, YAML errors name it
            data = yaml.load(f, Loader=UniqueKeyLoader)
    except OSError as e:
        raise ProfileError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except yaml.YAMLError as e:
        raise ProfileError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    if "base" not in data:
        return data
    base = data.pop("base")
    if not isinstance(base, str) or not base:
        raise ProfileError(f"{path}: key base: a bundled profile name or a profile path, got {base!r}")
    base_path = profile_path(path.parent / base if looks_like_path(base) else base)
    if base_path.resolve() in seen or base_path.resolve() == path.resolve():
        raise ProfileError(f"{path}: key base: {base!r} leads back to itself")
    return merged(read_profile_data(base_path, (*seen, path.resolve())), data)


def merged(base: dict, changes: dict) -> dict:
    """`changes` over `base`: mappings merge key by key, anything else (a list, a value) replaces."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_profile(name_or_path: str | Path) -> Profile:
    path = profile_path(name_or_path)
    return validated(read_profile_data(path), str(path))


def with_overrides(profile: Profile, assignments: list[str], origin: str = "--set") -> Profile:
    """The profile with each `SECTION.KEY=VALUE` set (VALUE read as YAML: `fp8`, `512`, `null`), validated again."""
    data = profile.model_dump()
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        if not sep or not key.strip():
            raise ProfileError(f"{origin} {assignment!r}: expected SECTION.KEY=VALUE, e.g. judge.quantization=fp8")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ProfileError(f"{origin} {assignment!r}: the value is not YAML ({' '.join(str(e).split())})") from None
        merged_into = value
        for part in reversed(key.strip().split(".")):
            merged_into = {part: merged_into}
        data = merged(data, merged_into)
    return validated(data, f"{profile.name} with {origin} {' '.join(assignments)}")


def validated(data: dict, origin: str) -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            key = ".".join(str(part) for part in err["loc"]) or "(top level)"
            message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            value = (
                "" if err["type"] in {"missing", "extra_forbidden", "value_error"} else f" (got {err.get('input')!r})"
            )
            problems.append(f"{origin}: key {key}: {message}{value}")
        raise ProfileError("\n".join(problems)) from None


def judge_overrides(
    profile: Profile, backend: str | None = None, endpoint: str | None = None, concurrency: int | None = None
) -> Profile:
    """The profile with the judge's backend, server endpoint or concurrency given on the command line. An endpoint
    for a profile without an `openai` section makes one (request shape `completions`: the kit's own token ids)."""
    judge = profile.judge.model_dump()
    if backend is not None:
        judge["backend"] = backend
    given = [
        option for option, value in (("--endpoint", endpoint), ("--concurrency", concurrency)) if value is not None
    ]
    if given and judge["backend"] != "openai":  # the server settings of any other backend would be ignored
        raise ValueError(
            f"{' and '.join(given)} set the server of the `openai` judge backend, but profile "
            f"{profile.name!r} judges with the {judge['backend']!r} backend: add --backend openai to "
            "judge through a server, or leave them out"
        )
    if given:
        server = judge.get("openai") or {}
        if endpoint is not None:
            server = {"request_shape": "completions", **server, "endpoint": endpoint}
        if concurrency is not None:
            server["concurrency"] = concurrency
        judge["openai"] = server
    if judge == profile.judge.model_dump():
        return profile
    try:
        return profile.model_copy(update={"judge": JudgeConfig.model_validate(judge)})
    except ValidationError as e:
        raise ValueError(
            "; ".join(f"judge.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        ) from None


def judge_run_profile(
    profile: Profile, backend: str | None = None, endpoint: str | None = None, concurrency: int | None = None
) -> tuple[Profile, bool]:
    """`judge_overrides`, named NAME-BACKEND when the overrides change the judge section's config hash: a profile of
    its own, to write beside the judgments so build-release can name it. The flag says whether they did."""
    overridden = judge_overrides(profile, backend, endpoint, concurrency)
    if overridden.config_hash("judge") == profile.config_hash("judge"):
        return overridden, False
    return overridden.model_copy(update={"name": f"{profile.name}-{overridden.judge.backend}"}), True


WITHHELD_ENDPOINT = "http://endpoint.withheld"


def withhold_endpoint(profile: Profile) -> Profile:
    """The profile as a release or a pilot record publishes it: an `openai` server's address (an internal host)
    replaced; it is not in the config hash, so the profile hash stays the judgments' own."""
    server = profile.judge.openai
    if server is None:
        return profile
    judge = profile.judge.model_copy(update={"openai": server.model_copy(update={"endpoint": WITHHELD_ENDPOINT})})
    return profile.model_copy(update={"judge": judge})
