"""A real, rate-limited link for one rank: a veth pair into a network namespace, shaped by tbf.

:class:`ShapedLink` creates a network namespace with one end of a veth pair in it and the other
end in the caller's namespace, each end with an address of a private /30 that exists only
between them. A rank process that joins the namespace (:func:`enter_namespace`) and tells gloo
to use its veth end (``GLOO_SOCKET_IFNAME``) sends all its traffic over that link, while the
other ranks, bound to the outer end's address, reach each other locally. Degrading the link
means adding a token-bucket filter (``tc qdisc ... tbf rate R burst B latency L``) as the root
qdisc of each end, so both directions are limited to ``R`` (Linux ``tc-tbf(8)``: tokens accrue
at ``R``, a bucket holds ``B`` bytes, packets that would wait longer than ``L`` are dropped).

This needs root, ``ip`` (iproute2) with network namespaces and ``tc`` with the tbf qdisc;
:func:`link_support` says whether they work here (netem is not required). Deleting the
namespace removes the veth pair and its qdiscs.
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["ShapedLink", "link_support", "enter_namespace", "tbf_command", "limit_rate"]

_CLONE_NEWNET = 0x40000000


def _run(cmd: list[str], netns: str | None = None) -> subprocess.CompletedProcess:
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _check(cmd: list[str], netns: str | None = None) -> None:
    """Run ``cmd`` (inside ``netns`` if given); RuntimeError with its stderr if it fails."""
    done = _run(cmd, netns)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")


def link_support() -> tuple[bool, str]:
    """(True, "") if a :class:`ShapedLink` can be made here, else (False, the reason)."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "not running as root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"'{tool}' not found"
    try:
        with ShapedLink() as link:
            link.degrade(100.0)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return False, f"veth/netns/tbf set-up failed: {exc}"
    return True, ""


def tbf_command(device: str, rate_mbit: float, burst_kbit: float = 32.0,
                latency_ms: float = 50.0) -> list[str]:
    """The ``tc`` command that makes a tbf of ``rate_mbit`` the root qdisc of ``device``."""
    if not rate_mbit > 0:
        raise ValueError(f"rate_mbit must be > 0; got {rate_mbit!r}")
    return ["tc", "qdisc", "replace", "dev", device, "root", "tbf", "rate",
            f"{rate_mbit:g}mbit", "burst", f"{burst_kbit:g}kbit", "latency", f"{latency_ms:g}ms"]


def limit_rate(device: str, rate_mbit: float, netns: str | None = None, **tbf) -> None:
    """Make a tbf of ``rate_mbit`` the root qdisc of ``device`` (:func:`tbf_command`; run inside
    ``netns`` if given); RuntimeError if ``tc`` fails."""
    _check(tbf_command(device, rate_mbit, **tbf), netns)


def enter_namespace(netns: str) -> None:
    """Move the calling thread (in a fresh single-threaded process: the process) into
    ``netns`` (``setns(2)`` on ``/var/run/netns/<netns>``)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({netns!r}) failed: {os.strerror(err)}")
    finally:
        os.close(fd)


class ShapedLink:
    """A veth pair between this namespace and a new one, to be shaped with tbf.

    Parameters
    ----------
    tag : str, optional
        Suffix of the namespace and device names (default: derived from the process id).

    Attributes
    ----------
    netns : str
        Namespace name.
    outer_dev, inner_dev : str
        Veth ends in this namespace and in ``netns``.
    outer_addr, inner_addr : str
        Their IPv4 addresses (a /30 of 10.213.0.0/16 chosen from the tag).
    """

    def __init__(self, tag: str | None = None):
        tag = f"{os.getpid() % 100000}" if tag is None else str(tag)
        if not tag.isalnum() or len(tag) > 8:
            raise ValueError(f"tag must be 1-8 alphanumeric characters; got {tag!r}")
        self.netns = f"argus{tag}"
        self.outer_dev, self.inner_dev = f"ar{tag}o", f"ar{tag}i"
        k = sum(ord(c) * 31 ** i for i, c in enumerate(tag)) % (64 * 256)
        a, b = divmod(k, 64)
        self.outer_addr, self.inner_addr = f"10.213.{a}.{4 * b + 1}", f"10.213.{a}.{4 * b + 2}"
        self._up = False

    def __repr__(self) -> str:
        return (f"ShapedLink(netns={self.netns!r}, {self.outer_dev} {self.outer_addr} <-> "
                f"{self.inner_dev} {self.inner_addr})")

    def create(self) -> ShapedLink:
        """Create the namespace, the veth pair and the addresses; bring both ends up."""
        if self._up:
            return self
        _check(["ip", "netns", "add", self.netns])
        self._up = True
        try:
            _check(["ip", "link", "add", self.outer_dev, "type", "veth", "peer", "name",
                         self.inner_dev])
            _check(["ip", "link", "set", self.inner_dev, "netns", self.netns])
            _check(["ip", "addr", "add", f"{self.outer_addr}/30", "dev", self.outer_dev])
            _check(["ip", "link", "set", self.outer_dev, "up"])
            _check(["ip", "addr", "add", f"{self.inner_addr}/30", "dev", self.inner_dev],
                        self.netns)
            _check(["ip", "link", "set", self.inner_dev, "up"], self.netns)
            _check(["ip", "link", "set", "lo", "up"], self.netns)
        except BaseException:
            self.delete()
            raise
        return self

    def delete(self) -> None:
        """Delete the namespace (which removes the veth pair and its qdiscs)."""
        if not self._up:
            return
        _run(["ip", "netns", "del", self.netns])
        _run(["ip", "link", "del", self.outer_dev])     # if the pair outlived the namespace
        self._up = False

    def __enter__(self) -> ShapedLink:
        return self.create()

    def __exit__(self, *exc) -> None:
        self.delete()

    def degrade(self, rate_mbit: float, **tbf) -> None:
        """Limit both directions to ``rate_mbit`` (tbf on both ends; see :func:`tbf_command`)."""
        limit_rate(self.outer_dev, rate_mbit, **tbf)
        limit_rate(self.inner_dev, rate_mbit, self.netns, **tbf)
