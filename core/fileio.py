"""Atomic file writes: outputs appear whole or not at all.

Several outputs of one run (the transcript and its report) are staged to
temporary files first and renamed into place together at the end, so a
failure or Ctrl-C leaves none of them half-written or out of step. A path
that is a symbolic link is written through to its target; a path that is
not a regular file (a FIFO, /dev/null, /dev/stdout) is written directly,
since it cannot be replaced by a rename.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fail(target: Path, exc: OSError) -> InputError:
    return InputError(f"cannot write: {exc.strerror or exc}", path=str(target), fix="check the folder exists and is writable")


@dataclass
class StagedWrites:
    """Temporary files waiting to be renamed over their targets by ``commit``."""

    _staged: list[tuple[str, Path]] = field(default_factory=list)

    def add(self, path: str | os.PathLike[str], chunks: Iterable[bytes]) -> None:
        target = Path(os.path.realpath(path))
        if target.exists() and not stat.S_ISREG(target.stat().st_mode):
            self._write_special(target, chunks)
            return
        directory = target.parent
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise _fail(target, exc) from None
        self._staged.append((tmp_name, target))
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask()
            os.chmod(tmp_name, mode)
        except OSError as exc:
            self.discard()
            raise _fail(target, exc) from None
        except BaseException:
            self.discard()
            raise

    @staticmethod
    def _write_special(target: Path, chunks: Iterable[bytes]) -> None:
        try:
            with open(target, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
        except OSError as exc:
            raise _fail(target, exc) from None

    def commit(self) -> None:
        try:
            for tmp_name, target in self._staged:
                os.replace(tmp_name, target)
        except OSError as exc:
            self.discard()
            raise _fail(target, exc) from None
        self._staged.clear()

    def discard(self) -> None:
        for tmp_name, _ in self._staged:
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
        self._staged.clear()


def atomic_write_chunks(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to a temporary file beside ``path``, then rename it over ``path``.

    A failure at any point (bad input discovered late, disk full, Ctrl-C)
    leaves ``path`` as it was and removes the temporary file.
    """
    staged = StagedWrites()
    staged.add(path, chunks)
    staged.commit()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    atomic_write_chunks(path, [data])


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)
