"""`validate`'s checks of the folder against its manifest.json: no file or folder is a link out of the release;
the manifest reads and its profile parses and matches its hash; manifest.schema.json is the contract's schema and
the manifest passes it; every data file is listed with its sha256 and size; data/ holds only the layout's folders
and complete shard name sets; and the manifest's row counts, statistics and model names are what the data and
profile give."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jsonschema.validators import Draft202012Validator, validator_for

from builder.release.contract import MANIFEST_SCHEMA, Manifest, ManifestError, SplitStats, manifest_json_schema
from builder.release.contract import read_manifest as contract_manifest
from builder.release.layout import CONFIGS, FILE_NAME, MANIFEST, TREC_QRELS_SUFFIX, data_files, file_rows
from generation.profiles.profile import Profile
from generation.storage.shards import sha256_file


def check_links(release: Path, check) -> None:
    """A link out of the release would be read by validate and uploaded by publish as if it were the release's own
    file (a card or manifest elsewhere, a user's file); links are not followed into folders."""
    root = release.resolve()
    for folder, folders, files in os.walk(release):
        for name in folders + files:
            path = Path(folder) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                check.fail(f"{path.relative_to(release)}: a link to {os.readlink(path)}, outside the release")


def read_manifest(release: Path) -> tuple[Manifest | None, str | None]:
    """The manifest through the contract (builder/release/contract.py), or why it is not one."""
    try:
        return contract_manifest(release), None
    except ManifestError as e:
        return None, str(e)


def manifest_profile(manifest: Manifest, check) -> Profile:
    """The contract parsed the profile; its hash is checked here."""
    profile = manifest.profile
    if profile.config_hash() != manifest.profile_hash:
        check.fail(f"{MANIFEST}: profile_hash {manifest.profile_hash} is not its profile's ({profile.config_hash()})")
    return profile


SCHEMA = f"{MANIFEST_SCHEMA} is the contract's JSON schema, and {MANIFEST} passes it"


def check_schema(release: Path, check) -> None:
    """The schema a user's own tools read the release by is the kit's (contract.py `manifest_schema`, compared as
    parsed JSON), and the manifest passes it under jsonschema, by the draft its `$schema` names (2020-12, which
    pydantic writes: https://docs.pydantic.dev/latest/concepts/json_schema/)."""
    own = json.loads(manifest_json_schema())
    try:
        stated = json.loads((release / MANIFEST_SCHEMA).read_text(encoding="utf-8"))
    except FileNotFoundError:
        check.fail(f"{MANIFEST_SCHEMA}: missing (build-release writes it beside {MANIFEST}); rebuild the release")
    except OSError as e:
        check.fail(f"{MANIFEST_SCHEMA}: cannot read ({e.strerror or e})")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        check.fail(f"{MANIFEST_SCHEMA}: not JSON ({e})")
    else:
        if stated != own:
            check.fail(
                f"{MANIFEST_SCHEMA}: not the contract's schema ({first_difference(stated, own)}); rebuild the release"
            )
    manifest = json.loads((release / MANIFEST).read_text(encoding="utf-8"))  # it parsed: validate read it first
    validator = validator_for(own, default=Draft202012Validator)(own)
    for error in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(p) for p in error.absolute_path) or "(top)"
        check.fail(f"{MANIFEST}: {where}: {error.message} (its JSON schema)")


def first_difference(stated: Any, own: Any, where: str = "") -> str:
    """Where a JSON value first differs from the contract's, by key path."""
    if isinstance(stated, dict) and isinstance(own, dict):
        for key in sorted(set(stated) | set(own)):
            path = f"{where}.{key}" if where else key
            if key not in stated:
                return f"{path} missing"
            if key not in own:
                return f"{path} added"
            if stated[key] != own[key]:
                return first_difference(stated[key], own[key], path)
    return f"{where or '(top)'} is {json.dumps(stated)[:80]}, the contract's {json.dumps(own)[:80]}"


def check_files(release: Path, manifest: Manifest, check, report) -> None:
    listed = manifest.files
    on_disk = {str(p.relative_to(release)) for p in data_files(release)}
    for name in sorted(set(listed) - on_disk):
        check.fail(f"{name}: listed but missing")
    for name in sorted(on_disk - set(listed)):
        check.fail(f"{name}: present but not listed")
    for name in sorted(set(listed) & on_disk):
        path = release / name
        if not path.is_file() or path.is_symlink():
            continue  # reported by the readable-files check
        entry = listed[name]
        if sha256_file(path) != entry.sha256:
            check.fail(f"{name}: sha256 differs from the manifest")
        elif entry.bytes != path.stat().st_size:
            check.fail(f"{name}: {path.stat().st_size} bytes, {entry.bytes} in the manifest")
    layout = report.check("data/ holds only the layout's folders (level partitions 0-5, unparsed) and splits")
    folders = {f for c in CONFIGS for f in c.folders}
    for path in sorted((release / "data").rglob("*")) if (release / "data").is_dir() else []:
        relative = str(path.relative_to(release / "data"))
        if path.is_dir() and relative not in folders and not any(f.startswith(relative + "/") for f in folders):
            layout.fail(f"data/{relative}/: not a folder of the layout (its files belong to no config)")
    names = report.check("shard names XXXXX-of-YYYYY are complete in every folder")
    groups: dict[tuple, list] = {}
    for name in on_disk | set(listed):
        if name.endswith(TREC_QRELS_SUFFIX):
            split = Path(name).name.removesuffix(TREC_QRELS_SUFFIX)
            if Path(name).parent != Path("data/qrels") or split not in manifest.splits:
                layout.fail(
                    f"{name}: a TREC qrels file is data/qrels/SPLIT{TREC_QRELS_SUFFIX} for a split of the "
                    f"manifest's {manifest.splits}"
                )
            continue
        match = FILE_NAME.match(Path(name).name)
        if not match:
            names.fail(f"{name}: not named split-XXXXX-of-YYYYY.parquet")
            continue
        if match["split"] not in manifest.splits:
            layout.fail(f"{name}: split {match['split']!r} is not one of the manifest's {manifest.splits}")
        groups.setdefault((str(Path(name).parent), match["split"], int(match["count"])), []).append(int(match["index"]))
    for (folder, split, count), indexes in groups.items():
        present = {i for i in indexes if (release / folder / f"{split}-{i:05d}-of-{count:05d}.parquet").exists()}
        for i in sorted(set(range(count)) - present):
            names.fail(f"{folder}/{split}-{i:05d}-of-{count:05d}.parquet: missing")


def check_manifest_numbers(
    release: Path, manifest: Manifest, profile: Profile | None, rows: dict, stats: dict[str, SplitStats], report
) -> None:
    check = report.check("manifest.json's row counts, statistics and model names equal the data and profile")
    for c in CONFIGS:
        for split, n in rows[c.name].items():
            stated = manifest.rows.get(c.name, {}).get(split, 0)
            if stated != n:
                check.fail(f"rows {c.name}/{split}: {stated} in the manifest, {n} in the data")
    for name, entry in manifest.files.items():
        path = release / name
        if path.is_file() and not path.is_symlink():
            try:
                n = file_rows(path)
            except Exception:  # noqa: BLE001 - unreadable files are reported by the readable-files check
                continue
            if entry.rows != n:
                check.fail(f"{name}: {entry.rows} rows in the manifest, {n} in the file")
    if manifest.stats != stats:
        differing = [
            f"{split}.{key}"
            for split, derived in stats.items()
            if split in manifest.stats
            for key in SplitStats.model_fields
            if getattr(manifest.stats[split], key) != getattr(derived, key)
        ]
        check.fail(f"stats differ from the data: {differing or 'splits'}")
    reranker = manifest.models.reranker
    if (
        profile is not None and not manifest.imported and not str(reranker or "").startswith(profile.rerank.model)
    ):  # an import names no reranker: the kit made no pool
        check.fail(f"models.reranker {reranker!r} is not the profile's {profile.rerank.model!r}")
