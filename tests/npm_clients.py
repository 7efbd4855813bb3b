"""The real agent CLIs the resume tests drive, installed once from npm into a cache folder.

``$COMPACT_TEST_CACHE`` (default ``~/.cache/compact-tests``) keeps one folder per package and
version; a test is skipped, with the reason, when Node.js or npm is missing or the package cannot
be installed (no registry).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def installed(package: str, version: str, folder_name: str, entry: str, *, timeout: int = 600) -> Path:
    """The path of ``entry`` (relative to the package's folder) of npm ``package@version``."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(f"Node.js and npm are needed to install {package}")
    cache = Path(os.environ.get("COMPACT_TEST_CACHE", Path.home() / ".cache" / "compact-tests"))
    folder = cache / f"{folder_name}-{version}"
    cli = folder / "node_modules" / package / entry
    if not cli.exists():
        folder.mkdir(parents=True, exist_ok=True)
        install = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder),
                                  f"{package}@{version}"],
                                 capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if install.returncode != 0 or not cli.exists():
            pytest.skip(f"cannot install {package}@{version}: {install.stderr.strip()[-200:]}")
    return cli
