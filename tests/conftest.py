from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def documentation() -> str:
    """The README and the reference pages it links to in docs/: what a user reads."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)
SAMPLES = ROOT / "sample_transcripts"
REALDATA = ROOT.parent / "shared" / "realdata"

pytest_plugins = ["tests.chat_server"]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own token-count cache, so no test depends on another's run."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("COMPACT_CACHE_DIR", str(cache))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("COMPACT_DEBUG", raising=False)
    return cache


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture
def realdata() -> Path:
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not beside this checkout")
    return REALDATA


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


os.environ.setdefault("COLUMNS", "120")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens", action="store_true", default=False,
        help="rewrite tests/golden/* from the current output instead of comparing",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """Compare text with tests/golden/NAME; regenerated only with --update-goldens."""
    update = request.config.getoption("--update-goldens")

    def check(name: str, text: str) -> None:
        path = ROOT / "tests" / "golden" / name
        if update:
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"missing golden file {path}; run pytest --update-goldens"
        assert text == path.read_text(encoding="utf-8"), f"{name} differs; rerun with --update-goldens if intended"

    return check

