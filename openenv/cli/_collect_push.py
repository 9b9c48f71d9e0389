"""Uploading a collected folder to a Hugging Face dataset repo (`openenv collect --push`)."""

from __future__ import annotations

from pathlib import Path

from openenv.cli._output import CliError

__all__ = ["dataset_card", "push_dataset"]


def dataset_card(folder: Path, repo_id: str) -> str:
    """A dataset README whose front matter makes results.jsonl the dataset's one split."""
    from openenv.training.collect import RESULTS_FILENAME, RolloutFolder

    count = sum(1 for _ in RolloutFolder(folder).rows())
    return (
        "---\n"
        "tags:\n  - openenv\n  - rollouts\n"
        "configs:\n  - config_name: default\n    data_files:\n"
        f"      - split: train\n        path: {RESULTS_FILENAME}\n"
        "---\n\n"
        f"# {repo_id}\n\n"
        f"{count} episodes collected with `openenv collect`: one JSON object per line in `{RESULTS_FILENAME}` "
        "(chat `messages`, the `tool_trace` of actions and rewards, `reward`, `metrics`); how they were "
        "collected is in `metadata.json`.\n\n"
        f'```python\nfrom datasets import load_dataset\n\nds = load_dataset("{repo_id}", split="train")\n```\n'
    )


def push_dataset(folder: Path, repo_id: str, *, private: bool = False) -> str:
    """Upload results.jsonl, metadata.json and a README to the dataset `repo_id`; returns its URL.

    The Hub and token are huggingface_hub's own (HF_ENDPOINT, HF_TOKEN or the saved login).
    """
    try:
        from huggingface_hub import CommitOperationAdd, HfApi
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:
        raise CliError("--push needs huggingface_hub", "pip install huggingface_hub") from None
    from openenv.training.collect import METADATA_FILENAME, RESULTS_FILENAME

    folder = folder.expanduser()
    if not (folder / RESULTS_FILENAME).is_file():
        raise CliError(f"{folder} holds no {RESULTS_FILENAME} to push", "collect into it first")
    api = HfApi()
    operations = [
        CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=dataset_card(folder, repo_id).encode()),
        CommitOperationAdd(path_in_repo=RESULTS_FILENAME, path_or_fileobj=str(folder / RESULTS_FILENAME)),
    ]
    if (folder / METADATA_FILENAME).is_file():
        operations.append(
            CommitOperationAdd(path_in_repo=METADATA_FILENAME, path_or_fileobj=str(folder / METADATA_FILENAME))
        )
    try:
        url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.create_commit(repo_id, operations, commit_message="Add rollouts from openenv collect", repo_type="dataset")
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        hint = (
            "log in (hf auth login) or set HF_TOKEN to a token that can write to it"
            if status in (401, 403)
            else "the collected files are kept; rerun with --push to try again"
        )
        raise CliError(f"pushing to the dataset {repo_id} failed: {exc}", hint) from None
    return str(url)
