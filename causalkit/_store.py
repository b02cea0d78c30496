"""The results store of the experiment engine: an append-only JSON Lines file, one finished task
(a replication, or a configuration x repetition) per line.

Guarantees
----------
* **Torn tails are harmless.** A record is one line ending in ``\\n``; strings (error messages
  included) are JSON-escaped, so a record never spans lines. Opening the store cuts the file back
  to its last complete line, in place, so a run killed mid-write or stopped by a full disk resumes.
* **No mixing.** A sidecar ``<out>.meta.json`` holds the design fingerprint (a hash of the
  design's parameters, the package version and caller-supplied flags such as ``quick``). A store
  whose fingerprint differs is refused with :class:`FingerprintMismatch`; ``overwrite=True``
  empties it instead.
* **One writer.** An advisory ``fcntl.flock`` on the results file itself (never replaced, only
  truncated in place) makes a second writer fail at once with :class:`StoreLocked`.
* **Bounded loss window.** Finished records are written in batches, at most
  :data:`WRITE_SECONDS` (50 ms) after they finish, and always when the store closes (also on an
  exception or Ctrl-C), so a SIGKILLed process loses at most its last 50 ms of finished work.
  ``fsync`` runs at most every ``sync_seconds`` (and on close), so an operating-system crash or
  power cut loses at most the records of the last ``sync_seconds`` seconds. A failed write
  (e.g. a full disk) is cut off again at once: the file never holds a torn record for long, and
  the next open cuts any torn tail.
* **Atomic side files.** The sidecar (and folder manifests) are written to a temporary file made
  with ``tempfile.mkstemp`` (``O_EXCL``) in the target folder, fsynced, then renamed over the old.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["ResultStore", "StoreLocked", "FingerprintMismatch", "atomic_write_json",
           "meta_path", "read_records", "to_json"]

FORMAT = "causalkit-results/2"
#: Longest time a finished record waits in memory before it is written (the loss window of a
#: killed process).
WRITE_SECONDS = 0.05


class StoreLocked(RuntimeError):
    """Another process holds the results file open for writing."""


class FingerprintMismatch(ValueError):
    """The results file was written by a different design."""


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store a value of type {type(value).__name__} in a results record")


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_json_default)


def to_json(value) -> str:
    """Compact one-line JSON (numpy scalars and arrays allowed; NaN kept as ``NaN``)."""
    return _ENCODER.encode(value)


def meta_path(out: Path) -> Path:
    """The sidecar of results file ``out``."""
    return out.with_name(out.name + ".meta.json")


def atomic_write_json(path: Path, value) -> None:
    """Write ``value`` as JSON to ``path`` through an ``O_EXCL`` temporary file in its folder."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)        # mkstemp makes 0600; a side file is as readable as its store
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh, indent=1, sort_keys=True, default=_json_default)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _parse(data: bytes, path: Path) -> tuple[list[dict], int]:
    """Records of the complete lines of ``data`` and the byte length those lines span."""
    end = data.rfind(b"\n") + 1
    records = []
    for number, line in enumerate(data[:end].splitlines(), start=1):
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path}: line {number} is not a results record ({exc}); the file "
                             "was changed by something other than causalkit") from None
    return records, end


def _is_legacy_csv(data: bytes) -> bool:
    return bool(data) and not data.startswith(b"{")


def read_records(path: Path) -> list[dict]:
    """The complete records of a results file (read-only: a torn tail is skipped, not cut)."""
    data = path.read_bytes()
    if _is_legacy_csv(data):
        raise ValueError(f"{path} is not a JSON Lines results file")
    return _parse(data, path)[0]


class ResultStore:
    """An open, locked JSON Lines results file (use as a context manager).

    Parameters
    ----------
    path : str or Path
        The results file; created (with its folder) if missing.
    fingerprint : str
        Hash identifying the design; stored in the sidecar and compared on reopen.
    description : dict
        What the fingerprint hashes, kept in the sidecar so a mismatch can name what changed.
    overwrite : bool
        Empty the file (and replace the sidecar) instead of resuming.
    sync_seconds : float
        Longest time between two ``fsync`` calls while records are being appended.
    """

    def __init__(self, path, fingerprint: str, description: dict, *, overwrite: bool = False,
                 sync_seconds: float = 1.0):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.description = description
        self.overwrite = overwrite
        self.sync_seconds = sync_seconds
        self._fd = None
        self._size = 0
        self._buffer: list[bytes] = []
        self._last_write = self._last_sync = 0.0
        self._dirty = False

    def __enter__(self) -> ResultStore:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(f"{self.path} is being written by another process; wait for it to "
                              "finish or choose another out") from None
        self._fd = fd
        try:
            self._prepare()
        except BaseException:
            self.close()
            raise
        self._last_write = self._last_sync = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _prepare(self) -> None:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0)
        sidecar = meta_path(self.path)
        self._size = 0
        if self.overwrite:
            os.ftruncate(self._fd, 0)
        elif data:
            if _is_legacy_csv(data):
                raise FingerprintMismatch(
                    f"out={str(self.path)!r} holds results in an older format (CSV); pass "
                    "overwrite=True (command line: --overwrite) or choose a new file")
            self._check_sidecar(sidecar)
            self.records, end = _parse(data, self.path)
            self._size = end
            if end < len(data):
                os.ftruncate(self._fd, end)
                os.fsync(self._fd)
            return
        self.records = []
        atomic_write_json(sidecar, {"format": FORMAT, "fingerprint": self.fingerprint,
                                    "design": self.description})

    def _check_sidecar(self, sidecar: Path) -> None:
        try:
            old = json.loads(sidecar.read_text())
        except FileNotFoundError:
            old = {}
        if old.get("fingerprint") == self.fingerprint:
            return
        before = old.get("design", {})
        changed = sorted(k for k in set(before) | set(self.description)
                         if before.get(k) != self.description.get(k))
        what = (f"differs in {', '.join(changed)}" if before
                else "has no fingerprint (sidecar missing or written by an older version)")
        raise FingerprintMismatch(
            f"out={str(self.path)!r} holds results of a different study: its design {what}; "
            "pass overwrite=True (command line: --overwrite) or choose a new file")

    def append(self, record: dict) -> None:
        """Buffer one record (one line); write the buffer once ``WRITE_SECONDS`` have passed
        since the last write, ``fsync`` once ``sync_seconds`` have passed since the last sync."""
        self._buffer.append((to_json(record) + "\n").encode())
        now = time.monotonic()
        if now - self._last_write >= WRITE_SECONDS:
            self.flush()
        if now - self._last_sync >= self.sync_seconds:
            self.sync()

    def flush(self) -> None:
        """Write the buffered records (one ``os.write`` loop); on failure cut them off again."""
        self._last_write = time.monotonic()
        if not self._buffer:
            return
        data = b"".join(self._buffer)
        self._buffer.clear()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            with contextlib.suppress(OSError):  # else the torn tail is cut at the next open
                os.ftruncate(self._fd, self._size)
            raise OSError(exc.errno, f"could not write to {self.path} ({os.strerror(exc.errno)});"
                          " every record written before is intact: free space and rerun to "
                          "resume") from exc
        self._size += len(data)
        self._dirty = True

    def sync(self) -> None:
        """Write the buffer and flush the written records to the disk."""
        self.flush()
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Write, sync, release the lock and close the file."""
        if self._fd is None:
            return
        try:
            self.sync()
        finally:
            os.close(self._fd)
            self._fd = None
