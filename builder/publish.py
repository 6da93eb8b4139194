"""`publish`: validate, then one Hub commit (with `parent_commit`) and a tag. A dry run unless told
otherwise. Files already on the Hub with the same content are not uploaded again. The token comes from
HF_TOKEN or the stored login, through huggingface_hub, and is never printed."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from builder.validate import validate
from generation.shards import sha256_file

ROOT_FILES = ("README.md", "manifest.json", "level_distribution.png")


class PublishRefused(RuntimeError):
    pass


@dataclass
class PublishPlan:
    repo: str
    revision: str
    parent_commit: str | None  # None: the repository does not exist yet
    uploads: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deletions: list[str] = field(default_factory=list)
    tag: str | None = None
    create_pr: bool = False

    def describe(self) -> list[str]:
        lines = [f"repository {self.repo} (dataset), revision {self.revision}, "
                 + (f"parent commit {self.parent_commit}" if self.parent_commit else "new repository: create it")]
        lines += [f"  upload  {p}" for p in self.uploads]
        lines += [f"  delete  {p}" for p in self.deletions]
        lines.append(f"  {len(self.unchanged)} files already on the Hub with the same content: not uploaded")
        lines.append(f"  one commit{' as a pull request' if self.create_pr else ''}"
                     + (f", then tag {self.tag}" if self.tag and not self.create_pr else ""))
        return lines


def git_blob_sha1(path: Path) -> str:
    """The git blob id the Hub reports for a regular (non-LFS) file."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def release_files(release: Path) -> list[str]:
    files = [name for name in ROOT_FILES if (release / name).exists()]
    files += sorted(str(p.relative_to(release)) for p in (release / "data").rglob("*.parquet"))
    return files


def same_content(local: Path, remote) -> bool:
    if getattr(remote, "lfs", None):
        return remote.lfs.sha256 == sha256_file(local)
    return remote.blob_id == git_blob_sha1(local)


def plan_publish(release: Path, api, repo: str, revision: str = "main", tag: str | None = None,
                 create_pr: bool = False) -> PublishPlan:
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.hf_api import RepoFile

    try:
        parent = api.repo_info(repo, repo_type="dataset", revision=revision).sha
        remote = {f.path: f for f in api.list_repo_tree(repo, repo_type="dataset", revision=revision, recursive=True)
                  if isinstance(f, RepoFile)}
    except (RepositoryNotFoundError, RevisionNotFoundError):
        parent, remote = None, {}
    plan = PublishPlan(repo, revision, parent, tag=tag, create_pr=create_pr)
    local = release_files(release)
    for name in local:
        (plan.unchanged if name in remote and same_content(release / name, remote[name]) else plan.uploads).append(name)
    plan.deletions = sorted(p for p in remote if p.startswith("data/") and p not in local)
    plan.deletions += sorted(p for p in remote if "/" not in p and p.endswith(".py"))
    return plan


def publish(release: Path, repo: str, tag: str | None = None, revision: str = "main", create_pr: bool = False,
            yes: bool = False, api=None, say: Callable[[str], None] = print) -> PublishPlan:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    release = Path(release)
    report = validate(release)
    if not report.ok:
        failed = [f"{c.name} ({c.failures})" for c in report.checks if not c.ok]
        raise PublishRefused(f"{release} does not validate: {'; '.join(failed)}; run `researchy-subq validate` for details")
    api = api or HfApi()
    plan = plan_publish(release, api, repo, revision, tag, create_pr)
    for line in plan.describe():
        say(line)
    if not yes:
        say("dry run: nothing was sent (pass --yes to publish)")
        return plan
    if plan.parent_commit is None:
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
    operations = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(release / p)) for p in plan.uploads]
    operations += [CommitOperationDelete(path_in_repo=p) for p in plan.deletions]
    revision_to_tag = plan.parent_commit
    if operations:
        commit = api.create_commit(repo, operations, commit_message=f"Release {tag or 'update'}", repo_type="dataset",
                                   revision=revision, create_pr=create_pr, parent_commit=plan.parent_commit)
        revision_to_tag = commit.oid
        say(f"committed {commit.oid}" + (f" as {commit.pr_url}" if create_pr and commit.pr_url else ""))
    else:
        say("nothing changed: no commit")
    if tag and not create_pr:
        api.create_tag(repo, tag=tag, revision=revision_to_tag, repo_type="dataset")
        say(f"tagged {revision_to_tag} as {tag}")
    return plan
