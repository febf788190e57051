"""The whole conversion's bounds and clean-up: wall-clock time, address space, signals, temporary files.

* Time: SIGALRM after --time-limit seconds raises LimitExceeded wherever the converter is (the
  PyTorch stage's process is killed by the parent's clean-up).
* Memory: RLIMIT_AS (inherited by the PyTorch stage's process), so an allocation past it is a
  MemoryError with a message instead of the kernel's OOM killer or a swapping machine.
* SIGTERM, SIGHUP and SIGINT raise Interrupted, so the `finally` blocks remove the staging folders;
  folders left by a converter killed with SIGKILL are removed by the next conversion into the same
  parent folder (their names carry the pid, which is no longer running).
* A stop (a signal, the time limit) is a BaseException, so that no library's `except Exception`
  swallows it (a SIGTERM landing in `import torch, onnx, onnxruntime` was lost that way and the
  conversion finished), and it is remembered: `check()` raises it again before the output is
  committed, even where a bare `except` swallowed it.
* A private TMPDIR for the process and its children, removed at the end: ONNX Runtime's telemetry
  writes mat-debug-<pid>.log and .ses into TMPDIR (a predictable path in /tmp otherwise).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import tempfile
from contextlib import contextmanager
from typing import Iterator, Optional

DEFAULT_TIME_LIMIT_S = 12 * 3600


class Stopped(BaseException):
    """The conversion was stopped (a signal, the time limit); its message is the one line to print."""


class LimitExceeded(Stopped):
    pass


class Interrupted(Stopped):
    pass


_stop: Optional[Stopped] = None


def _raise(stop: Stopped):
    global _stop
    if _stop is None:
        _stop = stop
    raise stop


def check() -> None:
    """Raises the stop a signal or the time limit asked for, if any: called before the output is committed."""
    if _stop is not None:
        raise _stop


def machine_memory_bytes() -> int:
    """Physical memory plus swap, twice: the address-space bound when none is given. Twice, because
    address space runs ahead of what is resident (thread stacks, malloc's 64 MB arenas per thread,
    mapped libraries: 830 MB of it for 260 MB resident in a small conversion on 2 cores), while
    the allocations this bound is for (a 10^9-wide tensor) are far past any machine."""
    total = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                key, rest = line.split(":", 1)
                if key in ("MemTotal", "SwapTotal"):
                    total += int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        return 0
    return 2 * total


def _on_alarm(seconds: float):
    def handler(_signum, _frame):
        _raise(LimitExceeded(f"the conversion ran past its time limit of {seconds:g} s (--time-limit); stopped, nothing written"))

    return handler


def _on_signal(signum, _frame):
    _raise(Interrupted(f"interrupted by {signal.Signals(signum).name}; stopped, staging folders removed, nothing written"))


def out_of_memory(err: BaseException) -> bool:
    """A MemoryError, or a library that could not be mapped for want of address space (an import under RLIMIT_AS)."""
    text = str(err)
    return isinstance(err, MemoryError) or (isinstance(err, OSError) or isinstance(err, ImportError)) and (
        "failed to map segment" in text or "Cannot allocate memory" in text)


def memory_error(limit_bytes: int) -> str:
    return (f"out of memory: the conversion reached its memory limit of {limit_bytes / 1e9:.1f} GB (--memory-limit) or the "
            "machine's; stopped, nothing written")


def install(time_limit_s: float, memory_limit_bytes: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    if time_limit_s > 0:
        signal.signal(signal.SIGALRM, _on_alarm(time_limit_s))
        signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    if memory_limit_bytes > 0:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_limit_bytes if hard == resource.RLIM_INFINITY else min(memory_limit_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def disarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(folder: str, prefix: str) -> None:
    """Removes `prefix<pid>-*` folders in `folder` whose converter is no longer running (killed with SIGKILL)."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def staging_dir(parent: str, prefix: str) -> str:
    """A new folder `prefix<pid>-XXXX` in `parent`, after removing the ones killed converters left."""
    remove_stale(parent, prefix)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent)


@contextmanager
def private_tmpdir() -> Iterator[Optional[str]]:
    """TMPDIR for this process and its children: a fresh 0700 folder, removed afterwards."""
    base = tempfile.gettempdir()
    remove_stale(base, "tessera-convert-")
    path = tempfile.mkdtemp(prefix=f"tessera-convert-{os.getpid()}-", dir=base)
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    try:
        yield path
    finally:
        tempfile.tempdir = None
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        shutil.rmtree(path, ignore_errors=True)
