"""The opaque jaxlib reads: an encoded call as one zlib stream, its kernels deflated once.

jaxlib inflates the opaque with zlib's `uncompress` (`ZlibUncompress`, `jaxlib/gpu/
triton_utils.cc`), which takes any valid zlib stream. Most of a call's bytes are its kernels'
(`_proto.kernel_bytes`: the binary, the IR), and they are the same every time the kernel is
lowered again, for a new shape, grid or scalar. So each kernel's bytes are deflated once while
they stay in `_state.DEFLATED_KERNELS`, as blocks that end on a full flush (byte-aligned,
referring to nothing before them), and a call's stream is those blocks with the bytes between
them written afresh (a few dozen bytes: stored as they are, which costs less than setting up a
deflater), behind zlib's header and ahead of the Adler-32 of the whole. The bytes depend only on
the input, the same in every process (JAX's persistent cache and `jax.export` rely on that).
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Sequence

from jax_triton_rocm.base import _state

# What `zlib.compress` writes first: deflate with a 32 KiB window, default level.
_ZLIB_HEADER = b"\x78\x9c"
_ADLER_BASE = 65521
# The bytes of a piece searched for first; the whole piece is then compared in place.
_PROBE_BYTES = 64
# Bytes between pieces up to this many are stored, not deflated.
_STORED_MAX = 256


def compress(data: bytes, pieces: Sequence[bytes] = ()) -> bytes:
    """`data` as a zlib stream; each of `pieces` found in it, in order, deflated once (while kept).

    Args:
      data: the bytes to compress (an encoded call).
      pieces: byte strings that `data` embeds, in the order they appear (the kernels' bytes);
        one not found after the previous is compressed with the bytes around it.

    Returns:
      A zlib stream that `zlib.decompress` (and jaxlib's `uncompress`) turns back into `data`.
    """
    parts = [_ZLIB_HEADER]
    checksum = zlib.adler32(b"")
    start = 0
    for piece in dict.fromkeys(pieces):
        # Probed by its first bytes, the rest compared in place: a long piece's own search
        # table costs more.
        at = data.find(piece[:_PROBE_BYTES], start)
        while at >= 0 and not data.startswith(piece, at):
            at = data.find(piece[:_PROBE_BYTES], at + 1)
        if at < 0:
            continue
        if at > start:
            gap = data[start:at]
            parts.append(_between(gap, last=False))
            checksum = zlib.adler32(gap, checksum)
        deflated, piece_checksum = _state.DEFLATED_KERNELS.memo(
            piece, functools.partial(_deflate_piece, piece))
        parts.append(deflated)
        checksum = adler32_combine(checksum, piece_checksum, len(piece))
        start = at + len(piece)
    tail = data[start:]
    parts.append(_between(tail, last=True))
    parts.append(zlib.adler32(tail, checksum).to_bytes(4, "big"))
    return b"".join(parts)


def adler32_combine(first: int, second: int, second_length: int) -> int:
    """The Adler-32 of two byte strings one after the other, from the checksum of each (as
    zlib's `adler32_combine`)."""
    remainder = second_length % _ADLER_BASE
    low = (first & 0xFFFF) + (second & 0xFFFF) - 1
    high = (first >> 16) + (second >> 16) + remainder * (first & 0xFFFF) - remainder
    return (high % _ADLER_BASE) << 16 | low % _ADLER_BASE


def _deflate_piece(piece: bytes) -> tuple[bytes, int]:
    """Raw deflate of `piece` at the default level, ending on a full flush, and its Adler-32;
    `compress` keeps it in `_state.DEFLATED_KERNELS`, once per piece."""
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    return (compressor.compress(piece) + compressor.flush(zlib.Z_FULL_FLUSH),
            zlib.adler32(piece))


def _between(data: bytes, *, last: bool) -> bytes:
    """The bytes between pieces (or after the last) as deflate blocks: a stored block when
    short (its header byte, its length and the length's complement, then the bytes as they are;
    the stream is byte-aligned there), else deflated; the last ends the stream."""
    if len(data) > _STORED_MAX:
        return _deflate_small(data, last=last)
    return bytes((1 if last else 0,)) + struct.pack("<HH", len(data), len(data) ^ 0xFFFF) + data


def _deflate_small(data: bytes, *, last: bool) -> bytes:
    """Raw deflate of the few bytes between pieces, with a window small enough to set up in a
    microsecond (a full one takes tens); the last ends the stream."""
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -9, 1)
    return compressor.compress(data) + compressor.flush(zlib.Z_FINISH if last
                                                        else zlib.Z_FULL_FLUSH)
