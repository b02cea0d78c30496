"""Process groups over gloo on the loopback interface, and the mock group used for isolated
bootstrap.

Worlds are raw ``ProcessGroupGloo`` objects built on a ``PrefixStore`` of one control
``TCPStore`` (the prefix carries the generation, so a shadow world can be built beside the live
one). ``MockComm`` has the same methods, but its collectives are local identities and its
point-to-point receives return zeros: a joining worker warms up its whole stage (forward, backward,
optimizer kernels) against it without touching the running job.
"""

from __future__ import annotations

import contextlib
import datetime
import socket

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupGloo

__all__ = ["Comm", "MockComm", "serve_store", "connect_store", "build_group"]


class _Done:
    def wait(self):
        return True


class Comm:
    """Thin wrapper over one gloo process group (``rank`` / ``size`` within that group)."""

    mock = False

    def __init__(self, pg, members: list[int]):
        self.pg = pg
        self.members = list(members)
        self.size = pg.size()
        self.rank = pg.rank()

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """In-place sum over the group."""
        if self.size > 1:
            self.pg.allreduce([tensor]).wait()
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Copies of every member's ``tensor`` (same shape everywhere), in group-rank order."""
        if self.size == 1:
            return [tensor]
        out = [torch.empty_like(tensor) for _ in range(self.size)]
        self.pg.allgather([out], [tensor]).wait()
        return out

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0):
        return self.pg.send([tensor], dst, tag)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0):
        return self.pg.recv([tensor], src, tag)

    def barrier(self) -> None:
        if self.size > 1:
            self.all_reduce(torch.zeros(1))

    def abort(self) -> None:
        """Close this group's connections (wakes peers blocked on it with an error)."""
        with contextlib.suppress(RuntimeError):
            self.pg.abort()


class MockComm:
    """Stand-in group of ``size`` ranks for isolated warm-up: no communication at all."""

    mock = True

    def __init__(self, size: int, rank: int):
        self.size, self.rank, self.members = size, rank, list(range(size))

    def all_reduce(self, tensor):
        return tensor

    def all_gather(self, tensor):
        return [tensor.clone() for _ in range(self.size)]

    def isend(self, tensor, dst, tag=0):
        return _Done()

    def irecv(self, tensor, src, tag=0):
        tensor.zero_()
        return _Done()

    def barrier(self):
        pass

    def abort(self):
        pass


def serve_store(timeout_s: float = 300.0):
    """A ``TCPStore`` server listening on 127.0.0.1 only; returns ``(store, port)``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    port = sock.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, None, True, datetime.timedelta(seconds=timeout_s),
                          wait_for_workers=False, multi_tenant=True,
                          master_listen_fd=sock.detach())
    return store, port


def connect_store(port: int, timeout_s: float = 300.0):
    return dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=timeout_s))


def build_group(store, prefix: str, members: list[int], me: int, timeout_s: float) -> Comm:
    """Gloo group over worker ids ``members`` (group rank = position); ``me`` must be a member.

    Blocks until every member has joined. Callers build the groups they belong to in one global
    order (sorted prefixes), so overlapping constructions cannot deadlock.
    """
    opts = ProcessGroupGloo._Options()
    opts._timeout = datetime.timedelta(seconds=timeout_s)
    opts._devices = [ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    pg = ProcessGroupGloo(dist.PrefixStore(prefix, store), members.index(me), len(members), opts)
    return Comm(pg, members)
