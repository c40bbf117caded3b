"""The publishing workflow builds the book with the README's own command and publishes the
folder that command writes; the README links to where the book will be."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
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
