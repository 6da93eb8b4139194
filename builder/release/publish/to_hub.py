"""`publish`: check the repo id, validate, plan against the Hub, then one commit (with `parent_commit`) and a
tag. A dry run unless told otherwise; a dry run that cannot reach the Hub (offline) still validates and lists every
file, and says what it could not see there (the repository, its files, the tag, the branch). The plan names a
stand-in judge or reranker. Files already on the Hub with the same content are not uploaded again;
an existing tag is refused before anything is written; a missing branch is created from main. The token
comes from HF_TOKEN or the stored login, through huggingface_hub, and is never printed."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from builder.release.assemble.imported import imported_line
from builder.release.contract import MANIFEST_SCHEMA, Manifest, ManifestError, read_manifest
from builder.release.layout import MANIFEST, data_files
from builder.release.publish.hub_errors import HubUnreachable, PublishRefused, checked_repo_id, hub_errors
from generation.storage.shards import sha256_file

ROOT_FILES = ("README.md", MANIFEST, MANIFEST_SCHEMA, "level_distribution.png")
STAND_IN_BACKEND = (
    "bi-encoder"  # the MiniLM cosine the demo's judge and reranker use (generation/profiles/backend_registry.py)
)
__all__ = ["PublishRefused", "PublishPlan", "plan_publish", "publish", "check_repo_id", "commit_description"]


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
    create_branch: bool = False  # the revision is a branch to create from main's head
    private: bool = False
    offline: str | None = None  # why the Hub was not asked: the plan lists every file, as for a new repository
    stand_ins: list[str] = field(default_factory=list)  # the release's models that stand in for the paper's

    def describe(self) -> list[str]:
        if self.offline:
            where = "not compared with the Hub (offline): every file is listed"
        elif self.parent_commit is None:
            where = f"new {'private' if self.private else 'public'} repository: create it"
        else:
            where = f"parent commit {self.parent_commit}"
        lines = [f"repository {self.repo} (dataset), revision {self.revision}, {where}"]
        lines += [f"  STAND-IN {model}" for model in self.stand_ins]
        if self.create_branch:
            lines.append(f"  create branch {self.revision} from main")
        lines += [f"  upload  {p}" for p in self.uploads]
        lines += [f"  delete  {p}" for p in self.deletions]
        if self.offline:
            lines += ["  not seen without the Hub:", *(f"    {what}" for what in self.unseen())]
        else:
            lines.append(f"  {len(self.unchanged)} files already on the Hub with the same content: not uploaded")
        lines.append(
            f"  one commit{' as a pull request' if self.create_pr else ''}"
            + (f", then tag {self.tag}" if self.tag and not self.create_pr else "")
        )
        return lines

    def unseen(self) -> list[str]:
        """What a plan made without the Hub cannot say: what plan_publish reads from the repository."""
        unseen = [
            "whether the repository exists",
            "which of these files it holds with the same content (those are not sent)",
            "which of its data/ files and root scripts the commit deletes",
        ]
        if self.tag and not self.create_pr:
            unseen.append(f"whether tag {self.tag} exists (publish refuses an existing tag)")
        if self.revision != "main":
            unseen.append(f"whether branch {self.revision} exists (a missing one is created from main)")
        return unseen


def stand_in_models(manifest: Manifest) -> list[str]:
    """The release's judge and reranker where a stand-in made them (the bi-encoder backend; the judge by the rule the
    card's stand-in notice follows, builder/release/assemble/folder.py), each as "judge: NAME" / "reranker: NAME"."""
    profile, models = manifest.profile, manifest.models
    found = []
    if profile.judge.backend == STAND_IN_BACKEND or "stand-in" in models.judge:
        found.append(f"judge: {models.judge}")
    if models.reranker is not None and profile.rerank.backend == STAND_IN_BACKEND:
        found.append(f"reranker: {models.reranker}")
    return found


def git_blob_sha1(path: Path) -> str:
    """The git blob id the Hub reports for a regular (non-LFS) file."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def release_files(release: Path) -> list[str]:
    files = [name for name in ROOT_FILES if (release / name).exists()]
    files += [str(p.relative_to(release)) for p in data_files(release)]
    return files


def same_content(local: Path, remote) -> bool:
    if getattr(remote, "lfs", None):
        return remote.lfs.sha256 == sha256_file(local)
    return remote.blob_id == git_blob_sha1(local)


def check_repo_id(release: Path, repo: str) -> Manifest:
    """Cheap checks before a full validate: a valid ORG/NAME, equal to the repo the card's snippets name."""
    checked_repo_id(repo)
    path = Path(release) / MANIFEST
    if not path.is_file():
        raise PublishRefused(f"{release} has no {MANIFEST}: build it with `researchy-subq build-release`")
    try:
        manifest = read_manifest(release)
    except ManifestError as e:
        raise PublishRefused(
            f"{path}: not a release manifest ({str(e).removeprefix(MANIFEST + ': ')}); "
            "rebuild it with `researchy-subq build-release`"
        ) from None
    if manifest.repo != repo:
        raise PublishRefused(
            f"{release} was built for {manifest.repo!r} (its card's loading snippets name it), "
            f"not {repo!r}: rebuild with `build-release --repo {repo}` or pass --repo "
            f"{manifest.repo}"
        )
    return manifest


# git's rules for a ref name (`git help check-ref-format`), which a Hub tag or branch is: no ASCII control
# character, space, ~ ^ : ? * [ or backslash; no "..", "@{" or "//"; no part that starts with "." or ends with
# ".lock"; not "@", not starting or ending with "/", not ending with ".".
REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def check_ref_name(name: str, option: str) -> None:
    """A tag or branch name git (and so the Hub) accepts, or PublishRefused saying why, before the Hub is asked."""
    parts = name.split("/")
    bad = REF_FORBIDDEN.search(name)
    why = (
        f"contains {bad.group()!r}"
        if bad
        else "is empty"
        if not name
        else "is '@'"
        if name == "@"
        else "starts or ends with '/'"
        if name.startswith("/") or name.endswith("/")
        else "ends with '.'"
        if name.endswith(".")
        else "has a part starting with '.' or ending with '.lock'"
        if any(p.startswith(".") or p.endswith(".lock") for p in parts)
        else None
    )
    if why:
        raise PublishRefused(f"{option} {name!r} is not a valid git ref name: it {why} (`git help check-ref-format`)")


def commit_description(manifest: Manifest) -> str:
    lines = [
        f"Built by researchy-subq-judgments {manifest.code_version} with profile "
        f"`{manifest.profile.name}` (config hash {manifest.profile_hash}).",
        f"Judge: {manifest.models.judge}; reranker: {manifest.models.reranker}.",
        imported_line(manifest.imported)
        if manifest.imported
        else f"Prompt: {manifest.prompt and manifest.prompt.id} (sha256 {manifest.prompt and manifest.prompt.sha256}).",
        "Judgments: " + ", ".join(f"{s} {n:,}" for s, n in manifest.rows.get("judgments", {}).items()) + ".",
    ]
    if manifest.shards_revision:
        lines.append(f"Judgment shards: revision {manifest.shards_revision}.")
    return "\n".join(lines)


def plan_publish(
    release: Path,
    api,
    repo: str,
    revision: str = "main",
    tag: str | None = None,
    create_pr: bool = False,
    private: bool = False,
) -> PublishPlan:
    from huggingface_hub.errors import RepositoryNotFoundError
    from huggingface_hub.hf_api import RepoFile

    with hub_errors(repo, "reading the repository"):
        try:
            refs = api.list_repo_refs(repo, repo_type="dataset")
        except RepositoryNotFoundError:
            refs = None
        branches = {b.name: b.target_commit for b in refs.branches} if refs else {}
        tags = {t.name: t.target_commit for t in refs.tags} if refs else {}
        if tag and tag in tags:
            raise PublishRefused(
                f"tag {tag} already exists on {repo} (commit {tags[tag]}): choose a new --tag, "
                f"or delete it first with `hf repo tag delete {repo} {tag} --repo-type dataset`"
            )
        base = revision if revision in branches else "main"
        parent = branches.get(base)
        remote = (
            {}
            if parent is None
            else {
                f.path: f
                for f in api.list_repo_tree(repo, repo_type="dataset", revision=parent, recursive=True)
                if isinstance(f, RepoFile)
            }
        )
    plan = PublishPlan(
        repo,
        revision,
        parent,
        tag=tag,
        create_pr=create_pr,
        private=private,
        create_branch=revision != "main" and revision not in branches,
    )
    local = release_files(release)
    for name in local:
        (plan.unchanged if name in remote and same_content(release / name, remote[name]) else plan.uploads).append(name)
    plan.deletions = sorted(p for p in remote if p.startswith("data/") and p not in local)
    plan.deletions += sorted(p for p in remote if "/" not in p and p.endswith(".py"))
    return plan


def offline_plan(
    release: Path, repo: str, revision: str, tag: str | None, create_pr: bool, private: bool, reason: str
) -> PublishPlan:
    """What a dry run can say without the Hub: every file of the release, as for a new repository."""
    return PublishPlan(
        repo,
        revision,
        None,
        uploads=release_files(release),
        tag=tag,
        create_pr=create_pr,
        private=private,
        offline=reason,
    )


def publish(
    release: Path,
    repo: str,
    tag: str | None = None,
    revision: str = "main",
    create_pr: bool = False,
    yes: bool = False,
    api=None,
    say: Callable[[str], None] = print,
    private: bool = False,
    notice: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> PublishPlan:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    from builder.release.validate.folder import validate

    release = Path(release)
    manifest = check_repo_id(release, repo)
    if tag is not None:
        check_ref_name(tag, "--tag")
    check_ref_name(revision, "--revision")
    report = validate(release)
    if not report.ok:
        failed = [f"{c.name} ({c.failures})" for c in report.checks if not c.ok]
        raise PublishRefused(
            f"{release} does not validate: {'; '.join(failed)}; run `researchy-subq validate` for details"
        )
    api = api or HfApi()
    if yes:
        with hub_errors(repo, "checking the token"):
            api.whoami()
    try:
        plan = plan_publish(release, api, repo, revision, tag, create_pr, private)
    except HubUnreachable as e:
        if yes:
            raise
        notice(f"dry run without the Hub: {e}")
        plan = offline_plan(release, repo, revision, tag, create_pr, private, str(e))
    plan.stand_ins = stand_in_models(manifest)
    for line in plan.describe():
        say(line)
    if not yes:
        say("dry run: nothing was sent (pass --yes to publish)")
        return plan
    operations = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(release / p)) for p in plan.uploads]
    operations += [CommitOperationDelete(path_in_repo=p) for p in plan.deletions]
    with hub_errors(repo, "publishing"):
        if plan.parent_commit is None:
            api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        if plan.create_branch:
            api.create_branch(repo, branch=revision, repo_type="dataset", exist_ok=True)
            say(f"created branch {revision}")
        revision_to_tag = plan.parent_commit
        if operations:
            commit = api.create_commit(
                repo,
                operations,
                commit_message=f"Release {tag or 'update'}",
                commit_description=commit_description(manifest),
                repo_type="dataset",
                revision=revision,
                create_pr=create_pr,
                parent_commit=plan.parent_commit,
            )
            revision_to_tag = commit.oid
            say(f"committed {commit.oid}" + (f" as {commit.pr_url}" if create_pr and commit.pr_url else ""))
        else:
            say("nothing changed: no commit")
        if tag and not create_pr:
            api.create_tag(repo, tag=tag, revision=revision_to_tag, repo_type="dataset")
            say(f"tagged {revision_to_tag} as {tag}")
    return plan
