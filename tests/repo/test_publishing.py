"""The publishing workflow builds the book with the README's own command and publishes the
folder that command writes; the README links to where the book will be."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"


def _readme_commands() -> list[str]:
    """The commands of the README's "Two commands" block (before their comments)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", text, re.S)
    assert block, "the README has a 'Two commands' bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_names_one_book_and_one_test_command():
    commands = _readme_commands()
    assert commands == ["python3 dev.py book", "python3 dev.py test"]


def test_workflow_runs_the_readme_book_command_and_publishes_its_output():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["build"]["steps"]
    runs = [s["run"].strip() for s in steps if "run" in s]
    book = _readme_commands()[0]
    assert book in runs
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages")]
    assert uploads and uploads[0]["with"]["path"] == "_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in deploy["steps"])


def test_dev_book_builds_paper_scale_by_default_and_checks_the_pages():
    source = (ROOT / "dev.py").read_text()
    assert re.search(r'"--scale".*?default="paper"', source, re.S)
    assert "check_html.py" in source


def test_readme_links_to_the_published_book():
    text = (ROOT / "README.md").read_text()
    assert re.search(r"\]\(https://[\w.-]+\.github\.io/[\w.-]+/?\)", text)


def test_pages_link_the_repository_and_offer_the_notebook_and_binder():
    """What readers of an executable book expect on every chapter: the repository (the same
    owner/name as the book's address in the README), the .ipynb download and a Binder launch.
    sphinx-book-theme writes the .ipynb of a MyST (.md) chapter only when a launch button is
    configured, so the Binder URL is what makes the notebook downloadable."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"]
    owner, name = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+)", url).groups()
    assert f"https://{owner}.github.io/{name}/" in (ROOT / "README.md").read_text()
    assert config["repository"]["branch"] == "main"
    html = config["html"]
    assert html["use_repository_button"] and html["use_issues_button"]
    assert html.get("use_download_button", True)
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    # Binder builds environment.yml (with jupytext); postBuild opens the .md chapters as notebooks
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert any(str(d).startswith("jupytext") for d in env["dependencies"][-1]["pip"])
    post = ROOT / "postBuild"
    assert "jupytext-config set-default-viewer" in post.read_text()
    assert post.stat().st_mode & 0o111
