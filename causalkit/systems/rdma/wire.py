"""Wire format of the emulated RC transport: one fixed header plus payload bytes.

Every packet that crosses a :mod:`~causalkit.systems.rdma.paths` path is encoded to ``bytes``, so
the in-process, UDP and shared-memory paths carry exactly the same thing. The header mirrors the
InfiniBand BTH/RETH/AETH/AtomicETH fields that the emulation needs (packet kind, opcode, first/last
flags, source and destination QP numbers, PSN, segment index, remote address, rkey, total length,
immediate data, two atomic operands); reference: InfiniBand Architecture Specification Vol. 1,
chapter 9 (transport layer).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["Packet", "KIND_REQ", "KIND_ACK", "KIND_NAK", "KIND_READ_RESP", "KIND_ATOMIC_RESP",
           "NAK_SEQ", "NAK_RNR", "NAK_INV_REQ", "NAK_REM_ACCESS", "FLAG_FIRST", "FLAG_LAST"]

KIND_REQ, KIND_ACK, KIND_NAK, KIND_READ_RESP, KIND_ATOMIC_RESP = range(5)
NAK_SEQ, NAK_RNR, NAK_INV_REQ, NAK_REM_ACCESS = range(1, 5)
FLAG_FIRST, FLAG_LAST = 1, 2

_HEADER = struct.Struct("!BBBBIIIIIIQIIIQQ")


@dataclass(slots=True)
class Packet:
    """One packet: header fields plus ``payload`` (bytes)."""

    kind: int
    opcode: int = 0
    flags: int = 0
    code: int = 0  # NAK code
    src_dev: int = 0
    dst_dev: int = 0
    src_qpn: int = 0
    dst_qpn: int = 0
    psn: int = 0
    seg: int = 0
    raddr: int = 0
    rkey: int = 0
    total_len: int = 0
    imm: int = 0
    a: int = 0
    b: int = 0
    payload: bytes = b""

    def encode(self) -> bytes:
        """Serialise to bytes (network byte order header + payload)."""
        return _HEADER.pack(self.kind, self.opcode, self.flags, self.code, self.src_dev,
                            self.dst_dev, self.src_qpn, self.dst_qpn, self.psn, self.seg,
                            self.raddr, self.rkey, self.total_len, self.imm, self.a,
                            self.b) + self.payload

    @classmethod
    def decode(cls, data: bytes) -> Packet:
        """Inverse of :meth:`encode`."""
        fields = _HEADER.unpack_from(data)
        return cls(*fields, payload=bytes(data[_HEADER.size:]))

    @property
    def is_ack(self) -> bool:
        """Responder-to-requester traffic (ACK, NAK, READ and atomic responses)."""
        return self.kind != KIND_REQ
