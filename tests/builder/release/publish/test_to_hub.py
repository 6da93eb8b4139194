"""publish, tested up to the network boundary: a recording stand-in for HfApi answers as the Hub would.
The Hub itself is never contacted in these tests."""

import shutil
import types

import httpx2 as httpx
import pytest
from huggingface_hub.errors import RepositoryNotFoundError
from huggingface_hub.hf_api import GitRefInfo, GitRefs, RepoFile

from builder.release.publish.to_hub import PublishRefused, git_blob_sha1, publish, release_files
from generation.storage.shards import sha256_file

# each test validates the release, loading every config, then publishes it
pytestmark = pytest.mark.slow

TOKEN = "hf_ThisTokenMustNeverBePrinted0123456789"


class RecordingHub:
    """Answers list_repo_refs / list_repo_tree / whoami like the Hub for a given remote state, and records every
    write."""

    def __init__(self, remote_files=None, tags=()):
        self.remote = remote_files  # None: the repository does not exist
        self.tags = [GitRefInfo(name=t, ref=f"refs/tags/{t}", target_commit="e" * 40) for t in tags]
        self.calls = []

    def whoami(self):
        return {"name": "someone"}

    def list_repo_refs(self, repo_id, repo_type=None):
        if self.remote is None:
            request = httpx.Request("GET", f"https://huggingface.co/api/datasets/{repo_id}/refs")
            raise RepositoryNotFoundError("not found", response=httpx.Response(404, request=request))
        main = GitRefInfo(name="main", ref="refs/heads/main", target_commit="a" * 40)
        return GitRefs(branches=[main], converts=[], tags=self.tags)

    def list_repo_tree(self, repo_id, repo_type=None, revision=None, recursive=False):
        assert revision == "a" * 40, "the plan reads the tree of the commit it will use as parent"
        return list(self.remote)

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def create_branch(self, repo_id, **kwargs):
        self.calls.append(("create_branch", repo_id, kwargs))

    def create_commit(self, repo_id, operations, **kwargs):
        self.calls.append(("create_commit", repo_id, [(type(o).__name__, o.path_in_repo) for o in operations], kwargs))
        return types.SimpleNamespace(oid="b" * 40, pr_url=None)

    def create_tag(self, repo_id, **kwargs):
        self.calls.append(("create_tag", repo_id, kwargs))


def remote_copy_of(release):
    files = []
    for name in release_files(release):
        path = release / name
        lfs = (
            {"size": path.stat().st_size, "oid": sha256_file(path), "pointerSize": 130}
            if name.endswith((".parquet", ".png"))
            else None
        )
        files.append(RepoFile(path=name, size=path.stat().st_size, oid=git_blob_sha1(path), lfs=lfs))
    return files


SYNTHETIC_RELEASE = dict(repo="org/rsj", subquestions=300, judgments=5600, test_share=0.2, shards=1, seed=5)


def test_new_repository(release, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub = RecordingHub(remote_files=None)
    said = []
    plan = publish(release, "org/rsj", tag="v1.0.0", yes=True, api=hub, say=said.append)
    assert plan.parent_commit is None and sorted(plan.uploads) == sorted(release_files(release))
    assert [c[0] for c in hub.calls] == ["create_repo", "create_commit", "create_tag"]
    assert hub.calls[0][2] == {"repo_type": "dataset", "private": False, "exist_ok": True}
    commit = hub.calls[1]
    assert commit[3]["parent_commit"] is None and commit[3]["repo_type"] == "dataset"
    assert "profile `paper`" in commit[3]["commit_description"] and "train 4," in commit[3]["commit_description"]
    assert sorted(p for _, p in commit[2]) == sorted(release_files(release))
    assert hub.calls[2][2] == {"tag": "v1.0.0", "revision": "b" * 40, "repo_type": "dataset"}
    assert TOKEN not in "\n".join(said) + capsys.readouterr().out


def test_unchanged_release_uploads_nothing_and_stale_shards_are_deleted(release, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    stale = RepoFile(
        path="data/judgments/level_5/train-00000-of-00009.parquet",
        size=1,
        oid="c" * 40,
        lfs={"size": 1, "oid": "d" * 64, "pointerSize": 130},
    )
    hub = RecordingHub(remote_files=remote_copy_of(release) + [stale])
    plan = publish(release, "org/rsj", tag="v1.0.1", yes=True, api=hub, say=lambda line: None)
    assert plan.uploads == [] and len(plan.unchanged) == len(release_files(release))
    assert plan.deletions == [stale.path]
    commit = hub.calls[0]
    assert commit[0] == "create_commit" and commit[2] == [("CommitOperationDelete", stale.path)]
    assert commit[3]["parent_commit"] == "a" * 40


def test_changed_file_is_uploaded_and_dry_run_sends_nothing(release):
    remote = remote_copy_of(release)
    readme = next(f for f in remote if f.path == "README.md")
    readme.blob_id = "0" * 40
    hub = RecordingHub(remote_files=remote)
    said = []
    plan = publish(release, "org/rsj", tag="v2.0.0", api=hub, say=said.append)
    assert plan.uploads == ["README.md"] and hub.calls == []
    assert said[-1].startswith("dry run") and any("upload  README.md" in line for line in said)


def test_invalid_release_is_refused(release, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(release, broken)
    (broken / "rsj.py").write_text("")
    hub = RecordingHub(remote_files=[])
    with pytest.raises(PublishRefused, match="no loading script"):
        publish(broken, "org/rsj", yes=True, api=hub)
    assert hub.calls == []


def test_cli_never_prints_the_token(release, monkeypatch):
    from typer.testing import CliRunner

    import builder.release.publish.to_hub as publish_module
    from builder.cli.main import app

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr("huggingface_hub.HfApi", lambda *a, **k: RecordingHub(remote_files=None))
    result = CliRunner().invoke(app, ["publish", str(release), "--repo", "org/rsj", "--tag", "v1"])
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output and TOKEN not in result.output
    assert publish_module.ROOT_FILES[0] == "README.md"


def test_existing_tag_is_refused_before_any_write(release):
    hub = RecordingHub(remote_files=remote_copy_of(release), tags=["v1.0.0"])
    with pytest.raises(PublishRefused, match="tag v1.0.0 already exists on org/rsj"):
        publish(release, "org/rsj", tag="v1.0.0", yes=True, api=hub, say=lambda line: None)
    assert hub.calls == []


def test_missing_branch_is_created_from_main_and_committed_to(release):
    hub = RecordingHub(remote_files=remote_copy_of(release)[:-1])
    plan = publish(release, "org/rsj", revision="dev", yes=True, api=hub, say=lambda line: None)
    assert plan.create_branch and plan.parent_commit == "a" * 40 and len(plan.uploads) == 1
    assert [c[0] for c in hub.calls] == ["create_branch", "create_commit"]
    assert hub.calls[0][2] == {"branch": "dev", "repo_type": "dataset", "exist_ok": True}
    assert hub.calls[1][3]["revision"] == "dev" and hub.calls[1][3]["parent_commit"] == "a" * 40


def test_private_new_repository(release):
    hub = RecordingHub(remote_files=None)
    said = []
    publish(release, "org/rsj", yes=True, api=hub, say=said.append, private=True)
    assert hub.calls[0] == ("create_repo", "org/rsj", {"repo_type": "dataset", "private": True, "exist_ok": True})
    assert "new private repository" in said[0]


@pytest.mark.parametrize(
    "repo, message",
    [
        ("org/other", "was built for 'org/rsj'"),
        ("rsj", "give the namespace too"),
        ("org/bad name", "is not a Hub repo id"),
    ],
)
def test_repo_id_is_checked_before_validating(release, monkeypatch, repo, message):
    def must_not_run(*args, **kwargs):
        raise AssertionError("validate ran before the repo id was checked")

    monkeypatch.setattr("builder.release.validate.folder.validate", must_not_run)
    with pytest.raises(PublishRefused, match=message):
        publish(release, repo, api=RecordingHub(remote_files=None), say=lambda line: None)


class OfflineHub(RecordingHub):
    def list_repo_refs(self, repo_id, repo_type=None):
        raise ConnectionError("no network")


def test_offline_dry_run_says_what_it_could_not_see(release):
    """Without the Hub a dry run lists every file; it says it did not see the repository, its files, the tag and the
    branch, instead of counting 0 files already there."""
    said, notices = [], []
    plan = publish(
        release, "org/rsj", tag="v3", revision="next", api=OfflineHub(), say=said.append, notice=notices.append
    )
    assert plan.offline and plan.unchanged == [] and "cannot reach the Hub" in notices[0]
    assert not any("already on the Hub" in line for line in said)
    unseen = said[said.index("  not seen without the Hub:") + 1 : said.index("  one commit, then tag v3")]
    assert unseen == [
        "    whether the repository exists",
        "    which of these files it holds with the same content (those are not sent)",
        "    which of its data/ files and root scripts the commit deletes",
        "    whether tag v3 exists (publish refuses an existing tag)",
        "    whether branch next exists (a missing one is created from main)",
    ]
    online = []
    publish(release, "org/rsj", api=RecordingHub(remote_copy_of(release)), say=online.append)
    assert f"  {len(release_files(release))} files already on the Hub with the same content: not uploaded" in online
    assert not any("not seen" in line or "STAND-IN" in line for line in online), "the paper profile's judge"


def test_stand_in_judge_and_reranker_are_named_in_the_plan(release, synthetic_release):
    """The demo profile's models (the MiniLM bi-encoder for both) are named as stand-ins, the paper's are not; the plan
    prints each on a line of its own (the demo's publish dry run, tests/end_to_end/test_demo_paste.py, prints them from publish)."""
    from builder.release.contract import read_manifest
    from builder.release.publish.to_hub import PublishPlan, stand_in_models

    stand_in, _ = synthetic_release("stand-in", profile="demo", repo="org/rsj", subquestions=30, judgments=400)
    models = read_manifest(stand_in).models
    assert stand_in_models(read_manifest(stand_in)) == [f"judge: {models.judge}", f"reranker: {models.reranker}"]
    assert stand_in_models(read_manifest(release)) == []
    plan = PublishPlan("org/rsj", "main", None, stand_ins=stand_in_models(read_manifest(stand_in)))
    assert plan.describe()[1:3] == [f"  STAND-IN judge: {models.judge}", f"  STAND-IN reranker: {models.reranker}"]
