"""The docs as a reader meets them: the tutorial's code runs and prints what the page says,
links stay inside the repository, and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIAL = (DOCS / "tutorial.md").read_text()

# A python block, optionally followed by "prints" and the text block it prints.
_EXAMPLE = re.compile(r"```python\n(.+?)\n```(?:\s*prints\s*```text\n(.+?)\n```)?", re.S)


def _examples() -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in _EXAMPLE.finditer(TUTORIAL)]


def test_the_tutorial_has_its_four_steps() -> None:
    assert len(_examples()) == 4


@pytest.mark.parametrize(("code", "printed"), _examples())
def test_tutorial_code_runs_and_prints_what_the_page_says(
    code: str, printed: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    exec(compile(code, "docs/tutorial.md", "exec"), {"__name__": "tutorial"})
    if printed is not None:
        assert capsys.readouterr().out.strip() == printed.strip()


def _links(path: Path) -> list[str]:
    prose = re.sub(r"```.+?```", "", path.read_text(), flags=re.S)  # not code
    prose = re.sub(r"`[^`]*`", "", prose)
    return re.findall(r"\]\(([^)#\s]+)", prose)


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))], ids=str)
def test_links_point_inside_the_repository(page: Path) -> None:
    for link in _links(page):
        if link.startswith(("http://", "https://")):
            continue
        target = (page.parent / link).resolve()
        assert target.is_relative_to(ROOT), f"{page.name}: {link} leaves the repository"
        assert target.exists(), f"{page.name}: {link} does not exist"


def test_the_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
