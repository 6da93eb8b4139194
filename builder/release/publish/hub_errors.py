"""Hub failures as one line that says what to do: `publish` raises `PublishRefused(line)` and the CLI prints it,
never a traceback. Statuses as huggingface_hub raises them (huggingface_hub/utils/_http.py
`hf_raise_for_status`): 401 bad or missing token (or a repository the token cannot see), 403 no write
access, 404 no such repository or revision, 409 a conflict (a tag or branch that exists), 412 the branch
moved since `parent_commit` was read."""

from __future__ import annotations

from contextlib import contextmanager


class PublishRefused(RuntimeError):
    pass


class HubUnreachable(PublishRefused):
    """The Hub was not reached at all (offline mode, no network): a dry run can still plan without it."""


WHAT_TO_DO: dict[int | None, str] = {  # an HTTP status (None: no response) -> what to do
    401: "the token is missing, invalid or expired: set HF_TOKEN or run `hf auth login`",
    403: "the token may not write to {repo}: use a token with write access to its namespace",
    404: "{repo} or its revision does not exist (or is not visible to this token): check --repo and --revision",
    409: "a conflict on {repo}: the tag or branch already exists; choose another --tag or delete the old one",
    412: "{repo} changed since the plan was made (parent commit is no longer the head): run publish again",
}


def checked_repo_id(repo: str, option: str = "--repo") -> str:
    """`repo` when it is a Hub repo id with its namespace (ORG/NAME); PublishRefused naming `option` otherwise."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as e:
        raise PublishRefused(f"{option} {repo!r} is not a Hub repo id: {str(e).splitlines()[0]}") from None
    if repo.count("/") != 1:
        raise PublishRefused(f"{option} {repo!r}: give the namespace too, as ORG/NAME")
    return repo


def one_line(text: object) -> str:
    return " ".join(str(text).split())[:300]


@contextmanager
def hub_errors(repo: str, step: str):
    """Turns a Hub or network failure during `step` into PublishRefused with what to do."""
    import httpx2  # the HTTP client huggingface_hub 2.x uses
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except OfflineModeIsEnabled:
        raise HubUnreachable(f"{step}: HF_HUB_OFFLINE is set; unset it to reach the Hub") from None
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else None
        hint = WHAT_TO_DO.get(status, "see the Hub's message; run again once it is resolved").format(repo=repo)
        server = one_line(getattr(e, "server_message", "") or str(e).splitlines()[0])
        raise PublishRefused(f"{step}: HTTP {status} from the Hub ({server}): {hint}") from None
    except (httpx2.TransportError, ConnectionError) as e:
        raise HubUnreachable(
            f"{step}: cannot reach the Hub ({type(e).__name__}: {one_line(e)}): check the network and HF_ENDPOINT"
        ) from None
