"""Atomic file writes: outputs appear whole or not at all.

Several outputs of one run (the transcript and its report) are staged to
temporary files first and renamed into place together at the end, so a
failure or Ctrl-C leaves none of them half-written or out of step. A path
the user named that is a symbolic link is written through to its target; one
that is not a regular file (a FIFO, /dev/null) is written directly, since it
cannot be replaced by a rename, and so is one naming a descriptor compact holds
open (/dev/stdout, /dev/fd/N, /proc/self/fd/N): to that descriptor, so a pipe
works and a ``>>`` redirect appends. Both are written at commit, before the
renames. A path compact derived
itself (``FILE.bak``, a batch output) is never followed nor opened: the rename
replaces whatever entry is there, so a planted symlink or FIFO is harmless.

Temporary files are named ``.NAME.compact-PID-XXXXXXXX.tmp``: the first write
into a folder removes those a killed run (``kill -9``) left there, whose
process is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import OutputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_TEMP_NAME = re.compile(r"\..+\.compact-(\d+)-[A-Za-z0-9_]+\.tmp")
_swept: set[str] = set()


def _temp_prefix(target: Path) -> str:
    return f".{target.name}.compact-{os.getpid()}-"


def sweep_stale_temps(folder: Path) -> list[Path]:
    """Remove the temporary files of compact runs that died in ``folder`` (once per folder per process)."""
    key = os.fspath(folder)
    if key in _swept:
        return []
    _swept.add(key)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False) or _alive(int(match.group(1))):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass  # another run cleaned it, or the folder is not ours to clean
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists (another user's): not ours to judge
    return True


def _fail(target: Path, exc: OSError, fix: str = "check the folder exists and is writable") -> OutputError:
    return OutputError(f"cannot write: {exc.strerror or exc}", path=str(target), fix=fix)


_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"/(?:dev/fd|proc/(self|thread-self|\d+)/fd)/(\d+)")


def open_descriptor(path: str | os.PathLike[str]) -> int | None:
    """The descriptor of this process that ``path`` names (/dev/stdout, /dev/fd/3, /proc/self/fd/3), or None.

    Resolving such a path gives the stream's target (``pipe:[123]``, or the file a ``>>`` redirect
    appends to), which can be neither created beside nor renamed over: it is written as it stands.
    """
    name = os.path.normpath(os.path.abspath(path))
    if name in _STREAMS:
        return _STREAMS[name]
    match = _FD_PATH.fullmatch(name)
    if match is None or match.group(1) not in (None, "self", "thread-self", str(os.getpid())):
        return None
    return int(match.group(2))


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT held back for the block (delivered when it ends), where the platform can, on the main thread."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def names_stdout(path: str | os.PathLike[str]) -> bool:
    """``-``, or a path naming this process's standard output (/dev/stdout, /dev/fd/1): both are stdout,
    which holds one thing."""
    return str(path) == "-" or open_descriptor(path) == 1


@dataclass
class StagedWrites:
    """Temporary files waiting to be renamed over their targets by ``commit``."""

    _staged: list[tuple[str, Path]] = field(default_factory=list)
    _direct: list[tuple[Path, Iterable[bytes | memoryview]]] = field(default_factory=list)

    def add(self, path: str | os.PathLike[str], chunks: Iterable[bytes | memoryview], *, follow: bool = True) -> None:
        """Stage ``chunks`` for ``path``. ``follow=False`` for paths the user did not name: no
        symlink is followed and no FIFO or device opened; the rename replaces the entry itself.
        A stream, a FIFO or a device the user named is kept for ``commit`` to write directly."""
        if follow:
            if open_descriptor(path) is not None:
                self._direct.append((Path(path), chunks))
                return
            target = Path(os.path.realpath(path))
            if target.exists() and not stat.S_ISREG(target.stat().st_mode):
                self._direct.append((target, chunks))
                return
        else:
            target = Path(os.path.abspath(path))
        directory = target.parent
        sweep_stale_temps(directory)
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=directory)
        except OSError as exc:
            raise _fail(target, exc) from None
        self._staged.append((tmp_name, target))
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            existing = target.lstat() if os.path.lexists(target) else None
            regular = existing is not None and stat.S_ISREG(existing.st_mode)
            mode = stat.S_IMODE(existing.st_mode) if regular and existing else 0o666 & ~_umask()
            os.chmod(tmp_name, mode)
        except OSError as exc:
            self.discard()
            raise _fail(target, exc) from None
        except BaseException:
            self.discard()
            raise

    @staticmethod
    def _write_directly(target: Path, chunks: Iterable[bytes | memoryview]) -> None:
        descriptor = open_descriptor(target)
        try:
            # A descriptor is written where it stands (a pipe, the end of a `>>` file) and left open.
            with open(target, "wb") if descriptor is None else open(descriptor, "wb", closefd=False) as handle:
                handle.writelines(chunks)
        except BrokenPipeError:
            raise  # a reader that stopped early (| head), as for stdout
        except OSError as exc:
            if descriptor is None:
                raise _fail(target, exc) from None
            raise _fail(target, exc, fix="check it is open for writing") from None

    def commit(self, done: Callable[[], None] | None = None) -> None:
        """Write the streams, FIFOs and devices, then rename every staged file into place, and call
        ``done`` (the caller's note that the outputs are in place) with the renames: Ctrl-C waits
        for both, so it never lands between two renames nor before the note."""
        try:
            for target, chunks in self._direct:
                self._write_directly(target, chunks)
        except BaseException:
            self.discard()
            raise
        with _interrupts_held():
            try:
                for tmp_name, target in self._staged:
                    os.replace(tmp_name, target)
            except OSError as exc:
                self.discard()
                raise _fail(target, exc) from None
            self._staged.clear()
            if done is not None:
                done()

    def discard(self) -> None:
        self._direct.clear()
        for tmp_name, _ in self._staged:
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
        self._staged.clear()


def atomic_write_chunks(path: str | os.PathLike[str], chunks: Iterable[bytes | memoryview], *, follow: bool = True) -> None:
    """Write ``chunks`` to a temporary file beside ``path``, then rename it over ``path``.

    A failure at any point (bad input discovered late, disk full, Ctrl-C)
    leaves ``path`` as it was and removes the temporary file. ``follow=False``
    for a path compact made up (see ``StagedWrites.add``).
    """
    staged = StagedWrites()
    staged.add(path, chunks, follow=follow)
    staged.commit()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, follow: bool = True) -> None:
    atomic_write_chunks(path, [data], follow=follow)


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """True for a regular file that is not a symlink (what compact may read back of its own outputs)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)
