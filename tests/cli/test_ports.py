"""Loopback ports of a one-host run: outside the kernel's ephemeral range, locked per run,
free when picked (mlerl.cli._ports)."""

import random
import socket

from mlerl.cli._ports import PortLease, bindable, candidates, ephemeral_range, loopback_port


def test_candidates_leave_out_the_ephemeral_range():
    got = candidates((32768, 60999), low=32760, high=61005)
    assert got == [
        32760,
        32761,
        32762,
        32763,
        32764,
        32765,
        32766,
        32767,
        61000,
        61001,
        61002,
        61003,
        61004,
        61005,
    ]


def test_ephemeral_range_reads_the_kernel_file(tmp_path):
    path = tmp_path / "range"
    path.write_text("40000\t50000\n")
    assert ephemeral_range(str(path)) == (40000, 50000)
    assert ephemeral_range(str(tmp_path / "missing")) == (32768, 60999)


def test_taken_ports_are_distinct_locked_and_never_ephemeral(tmp_path):
    first, second = PortLease(tmp_path), PortLease(tmp_path)
    lo, hi = ephemeral_range()
    ports = first.take(3, random.Random(0))
    assert len(set(ports)) == 3 and not any(lo <= p <= hi for p in ports)
    # another run cannot hold a port this one holds (the lock), even though it is bindable
    assert all(bindable(p) for p in ports) and not any(second.hold(p) for p in ports)
    # the same shuffled order in the second lease skips the held ports
    assert not set(second.take(3, random.Random(0))) & set(ports)
    first.release()
    assert second.hold(ports[0])  # released with the run
    second.release()


def test_a_bound_port_is_not_held(tmp_path):
    lease = PortLease(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        assert not lease.hold(sock.getsockname()[1])
    lease.release()


def test_a_kernel_assigned_port_never_lands_on_a_taken_one(tmp_path):
    """What broke the 2-rank run: a ``bind(0)`` (torchrun's rendezvous) got our port."""
    lease = PortLease(tmp_path)
    ours = set(lease.take(2))
    socks = []
    try:
        for _ in range(200):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
            assert sock.getsockname()[1] not in ours
    finally:
        for sock in socks:
            sock.close()
        lease.release()


def test_loopback_port_only_reads_our_own_addresses():
    assert loopback_port("tcp://127.0.0.1:5555") == 5555
    assert loopback_port("tcp://0.0.0.0:5555") is None and loopback_port("ipc:///tmp/x") is None
