"""The release as users download it, and publishing against real HTTP, all on loopback addresses only.

- `olah` (a Hub-API server) serves a git repository of the built release from its local-mirror folder
  (`mirrors-path`/datasets/ORG/NAME, offline mode: olah/server_mirror.py, olah/mirror/repos.py); a
  subprocess with HF_ENDPOINT pointing at it runs `load_dataset("ORG/NAME", config, revision="main")` for
  every config the card publishes. (olah resolves a revision-less repo lookup upstream, so the revision is named.)
- `plan_publish` runs with the real HfApi against that server: refs, tree and blob ids come over HTTP.
- A loopback server answering every request with one status checks that each Hub error becomes one line
  naming what to do, in the library and in the CLI.
"""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from builder.release.publish.hub_errors import PublishRefused
from builder.release.publish.to_hub import plan_publish, publish

# an olah server, and the Hub's clients in their own processes
pytestmark = pytest.mark.subprocess

REPO = "org/researchy-subq-judgments"  # the repo synthetic_release (conftest.py) builds for
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def git(*args, cwd):
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.org", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


SYNTHETIC_RELEASE = dict(subquestions=300, judgments=5000, test_share=0.25, shards=1, seed=8, unparsed_share=0.01)


@pytest.fixture(scope="module")
def hub(release, tmp_path_factory):
    """olah on a free loopback port, serving a git repository of the release with a v1.0.0 tag."""
    root = tmp_path_factory.mktemp("olah")
    mirror = root / "mirrors" / "datasets" / REPO
    mirror.parent.mkdir(parents=True)
    subprocess.run(["cp", "-r", str(release), str(mirror)], check=True)
    git("init", "-q", "-b", "main", cwd=mirror)
    git("add", "-A", cwd=mirror)
    git("commit", "-qm", "release", cwd=mirror)
    git("tag", "v1.0.0", cwd=mirror)
    port = free_port()
    config = root / "olah.toml"
    config.write_text(f"""[basic]
host = "{LOOPBACK}"
port = {port}
repos-path = "{root / "cache"}"
mirror-scheme = "http"
mirror-netloc = "{LOOPBACK}:{port}"
mirror-lfs-netloc = "{LOOPBACK}:{port}"
mirrors-path = ["{root / "mirrors"}"]
hf-netloc = "{LOOPBACK}:9"
hf-lfs-netloc = "{LOOPBACK}:9"
[accessibility]
offline = true
""")
    olah = Path(sys.executable).with_name("olah-cli")
    server = subprocess.Popen(
        [str(olah), "-c", str(config), "--log-path", str(root / "logs")],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://{LOOPBACK}:{port}"
    try:
        for _ in range(120):
            try:
                socket.create_connection((LOOPBACK, port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("olah did not start")
        yield {"endpoint": endpoint, "root": root}
    finally:
        server.terminate()
        server.wait(timeout=30)


LOAD_EVERY_CONFIG = """
import json, sys
import datasets
repo, configs = sys.argv[1], json.loads(sys.argv[2])
assert sorted(datasets.get_dataset_config_names(repo, revision="main")) == sorted(configs)
rows = {}
for name in configs:
    loaded = datasets.load_dataset(repo, name, revision="main")
    rows[name] = {split: len(ds) for split, ds in loaded.items()}
print(json.dumps(rows))
"""


def test_every_config_downloads_by_repo_name(release, hub, tmp_path):
    card = yaml.safe_load((release / "README.md").read_text().split("---\n")[1])
    configs = [c["config_name"] for c in card["configs"]]
    assert "unparsed" in configs and "diversity-qrels" in configs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "TRANSFORMERS_"))}
    env.update(
        HF_ENDPOINT=hub["endpoint"],
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_DISABLE_XET="1",
        NO_PROXY=LOOPBACK,
        no_proxy=LOOPBACK,
    )
    result = subprocess.run(
        [sys.executable, "-c", LOAD_EVERY_CONFIG, REPO, json.dumps(configs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    declared = {i["config_name"]: {s["name"]: s["num_examples"] for s in i["splits"]} for i in card["dataset_info"]}
    assert rows == declared


def test_the_cards_trec_download_fetches_the_qrels_file(release, hub, tmp_path):
    """The card's `hf download` line for the TREC qrels file, run with the `hf` CLI against the served repository."""
    body = (release / "README.md").read_text()
    command = next(
        line
        for line in re.search(r"```bash\n(.*?)\n```", body, re.DOTALL)[1].splitlines()
        if line.startswith("hf download")
    )
    args = command.split()
    assert args[:3] == ["hf", "download", REPO] and args[-2:] == ["--local-dir", "."]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "TRANSFORMERS_"))}
    env.update(
        HF_ENDPOINT=hub["endpoint"],
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_DISABLE_XET="1",
        NO_PROXY=LOOPBACK,
        no_proxy=LOOPBACK,
    )
    hf = Path(sys.executable).with_name("hf")
    # olah resolves a revision-less lookup upstream (module docstring): the revision is named
    result = subprocess.run(
        [str(hf), *args[1:], "--revision", "main"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    path = args[3]
    assert (tmp_path / path).read_bytes() == (release / path).read_bytes() != b""


@pytest.fixture(autouse=True)
def online(monkeypatch):
    """conftest makes every test offline; these talk HTTP, to loopback servers only (endpoints set per client)."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)


@pytest.fixture
def hub_api(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub["endpoint"], token=False)


def test_plan_against_the_served_repository(release, hub_api):
    plan = plan_publish(release, hub_api, REPO, tag="v1.0.1")
    head = hub_api.list_repo_refs(REPO, repo_type="dataset").branches[0].target_commit
    assert plan.parent_commit == head and not plan.create_branch
    assert plan.uploads == [] and plan.deletions == [] and len(plan.unchanged) == len(list(release.rglob("*.*")))


def test_existing_tag_on_the_served_repository_is_refused(release, hub_api):
    with pytest.raises(PublishRefused, match="tag v1.0.0 already exists"):
        plan_publish(release, hub_api, REPO, tag="v1.0.0")


def test_missing_branch_is_planned_from_main(release, hub_api):
    plan = plan_publish(release, hub_api, REPO, revision="v2-candidate")
    assert plan.create_branch and plan.uploads == []
    assert "  create branch v2-candidate from main" in plan.describe()


class StatusServer(ThreadingHTTPServer):
    """Answers every request with one HTTP status and a Hub-style JSON error body."""

    def __init__(self, status: int):
        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                body = json.dumps({"error": f"status {status} from the test server"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer

            def log_message(self, *args):
                pass

        super().__init__((LOOPBACK, 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.server_address[1]}"


@pytest.mark.parametrize(
    "status, hint",
    [
        (401, "set HF_TOKEN or run `hf auth login`"),
        (403, "write access"),
        (404, "check --repo and --revision"),
        (409, "already exists"),
        (412, "run publish again"),
        (500, "run again once it is resolved"),
    ],
)
def test_each_hub_error_is_one_line_saying_what_to_do(release, status, hint):
    from huggingface_hub import HfApi

    server = StatusServer(status)
    try:
        with pytest.raises(PublishRefused) as refused:
            publish(
                release, REPO, yes=True, api=HfApi(endpoint=server.endpoint, token="hf_test"), say=lambda line: None
            )
    finally:
        server.shutdown()
    message = str(refused.value)
    assert "\n" not in message and f"HTTP {status}" in message and hint in message


def test_offline_and_unreachable_hub(release, monkeypatch):
    """Publishing refuses in one line without the Hub; a dry run still validates and lists every file, and says it
    could not compare them with the Hub."""
    from huggingface_hub import HfApi

    from builder.release.publish.to_hub import release_files

    def unreachable():
        return HfApi(endpoint=f"http://{LOOPBACK}:{free_port()}", token="hf_test")

    with pytest.raises(PublishRefused, match="cannot reach the Hub .*check the network"):
        publish(release, REPO, yes=True, api=unreachable(), say=lambda line: None)
    lines, notices = [], []
    plan = publish(release, REPO, api=unreachable(), say=lines.append, notice=notices.append)
    assert plan.offline and plan.uploads == release_files(release) and len(plan.uploads) > 10
    assert len(notices) == 1 and "cannot reach the Hub" in notices[0]
    assert "not compared with the Hub (offline)" in lines[0]
    assert lines[-1] == "dry run: nothing was sent (pass --yes to publish)"
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(PublishRefused, match="HF_HUB_OFFLINE is set"):
        publish(release, REPO, yes=True, api=unreachable(), say=lambda line: None)
    notices.clear()
    assert publish(release, REPO, api=unreachable(), say=lambda line: None, notice=notices.append).offline
    assert "HF_HUB_OFFLINE is set" in notices[0]


def test_cli_prints_one_line_and_no_traceback(release, tmp_path):
    server = StatusServer(403)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "TRANSFORMERS_"))}
    env.update(
        HF_ENDPOINT=server.endpoint,
        HF_TOKEN="hf_ThisTokenMustNeverBePrinted01234",
        HF_HOME=str(tmp_path),
        NO_PROXY=LOOPBACK,
        no_proxy=LOOPBACK,
        COLUMNS="300",
    )
    try:
        result = subprocess.run(
            [Path(sys.executable).with_name("researchy-subq"), "publish", str(release), "--repo", REPO, "--yes"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.shutdown()
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "hf_ThisTokenMustNeverBePrinted" not in output
    errors = [line for line in output.splitlines() if "HTTP 403" in line]
    assert len(errors) == 1 and "write access" in errors[0]
