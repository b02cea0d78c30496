"""The real degraded link: a veth pair into a network namespace, rate-limited with tbf.

Tests that create namespaces skip unless this process is root with working ``ip netns`` and
``tc ... tbf`` (:func:`link_support`).
"""

import multiprocessing as mp
import socket
import threading
import time

import pytest

from causalkit.systems.tracing import TrainingExperiment
from causalkit.systems.tracing.netns import ShapedLink, enter_namespace, link_support, tbf_command

SUPPORTED, WHY = link_support()
needs_link = pytest.mark.skipif(not SUPPORTED, reason=f"no real link here: {WHY}")


def test_tbf_command_and_argument_checks():
    assert tbf_command("ar1o", 50) == ["tc", "qdisc", "replace", "dev", "ar1o", "root", "tbf",
                                       "rate", "50mbit", "burst", "32kbit", "latency", "50ms"]
    with pytest.raises(ValueError, match="rate_mbit"):
        tbf_command("ar1o", 0)
    with pytest.raises(ValueError, match="tag"):
        ShapedLink("bad-tag!")
    with pytest.raises(ValueError, match="link_mode"):
        TrainingExperiment(fault="link_degradation", world_size=4, link_mode="netem")
    with pytest.raises(ValueError, match="link_rate_mbit"):
        TrainingExperiment(fault="link_degradation", world_size=4, link_mode="tbf",
                           link_rate_mbit=0)
    assert TrainingExperiment(fault="compute_straggler").resolved_link_mode() == "none"


def _send(netns: str, addr: str, port: int, nbytes: int) -> None:
    enter_namespace(netns)
    with socket.create_connection((addr, port), timeout=20) as conn:
        conn.sendall(b"\0" * nbytes)


def _throughput_mbit(link: ShapedLink, nbytes: int) -> float:
    """Bytes sent from inside the namespace to a server on the outer end, in Mbit/s."""
    server = socket.create_server((link.outer_addr, 0))
    port = server.getsockname()[1]
    result = {}

    def receive():
        conn, _ = server.accept()
        with conn:
            got, t0 = 0, time.perf_counter()
            while got < nbytes:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                got += len(chunk)
            result["mbit"] = got * 8 / (time.perf_counter() - t0) / 1e6

    thread = threading.Thread(target=receive)
    thread.start()
    child = mp.get_context("fork").Process(target=_send,
                                           args=(link.netns, link.outer_addr, port, nbytes))
    child.start()
    child.join(30)
    thread.join(30)
    server.close()
    assert child.exitcode == 0
    return result["mbit"]


@needs_link
def test_shaped_link_limits_the_rate():
    with ShapedLink("t1") as link:
        free = _throughput_mbit(link, 2_000_000)
        link.degrade(20.0)
        shaped = _throughput_mbit(link, 2_000_000)
    assert shaped < 1.3 * 20 and shaped > 0.3 * 20
    assert free > 5 * shaped
    # deleting the namespace removed the pair
    assert link.netns not in _namespaces()


def _namespaces() -> set[str]:
    import subprocess

    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.mark.slow
@needs_link
def test_real_degraded_link_is_named_as_the_group():
    row = TrainingExperiment(fault="link_degradation", world_size=4, steps=48,
                             link_mode="tbf").run().iloc[0]
    assert row["link_mode"] == "tbf" and not row["emulated"]
    assert row["step_ms_after"] > 1.5 * row["step_ms_before"]
    assert row["detected"] and row["culprit_kind"] == "link_degradation", row.to_dict()
