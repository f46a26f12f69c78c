"""The opaque's zlib stream: each kernel's bytes deflated once, with its image, the whole stream
read back by zlib and by jaxlib's own inflater."""

import random
import zlib

import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.routes.jaxlib import _proto
from tests.support import kernels
from tests.support.lowering_utils import capture_one, opaque_metadata, spec


def _data_with_pieces(seed: int, count: int | None = None) -> tuple[bytes, list[tuple]]:
    """Random bytes holding `count` (else 0-3) random pieces, with gaps of 0 to 600 bytes; the
    pieces as `compress` takes them (`_proto.deflated`)."""
    rng = random.Random(seed)
    count = rng.randint(0, 3) if count is None else count
    pieces = [rng.randbytes(rng.randint(1, 5000)) for _ in range(count)]
    gaps = [rng.randbytes(rng.choice([0, 1, 7, 600])) for _ in range(len(pieces) + 1)]
    return (gaps[0] + b"".join(p + g for p, g in zip(pieces, gaps[1:])),
            [_proto.deflated(p) for p in pieces])


@pytest.mark.parametrize("seed", range(12))
def test_decompresses_to_the_data(seed):
    data, pieces = _data_with_pieces(seed)
    assert zlib.decompress(_proto.compress(data, pieces)) == data


@pytest.mark.parametrize("asked", ["missing", "reversed", "repeated", "none"])
def test_pieces_not_found_in_order_are_compressed_with_the_rest(asked):
    data, pieces = _data_with_pieces(3, count=2)
    given = {"missing": pieces + [_proto.deflated(b"not in the data" * 9)],
             "reversed": pieces[::-1],
             "repeated": pieces + pieces, "none": []}[asked]
    assert zlib.decompress(_proto.compress(data, given)) == data


@pytest.fixture
def full_deflates(monkeypatch):
    """Counts the deflates with zlib's full window (those of kernels' bytes, not of the few
    bytes between them)."""
    started = []
    original = zlib.compressobj

    def counting(*args, **kwargs):
        if len(args) > 2 and args[2] == -zlib.MAX_WBITS:
            started.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(zlib, "compressobj", counting)
    return started


def test_the_same_input_gives_the_same_bytes_when_deflated_afresh():
    data, pieces = _data_with_pieces(5, count=2)
    first = _proto.compress(data, pieces)
    assert _proto.compress(data, [_proto.deflated(piece) for piece, _, _ in pieces]) == first


def test_a_piece_met_again_is_not_deflated_again(full_deflates):
    piece = _proto.deflated(bytes(range(256)) * 40)
    _proto.compress(b"head" + piece[0] + b"tail", [piece])
    assert len(full_deflates) == 1
    opaque = _proto.compress(b"other head" + piece[0] + b"other tail", [piece])
    assert len(full_deflates) == 1
    assert zlib.decompress(opaque) == b"other head" + piece[0] + b"other tail"


def test_clear_caches_forgets_the_deflated_kernels(full_deflates):
    x = spec((4096,), jnp.float32)
    jtr.clear_caches()  # an earlier test in this process may have deflated the same kernel
    capture_one(lambda x, y: kernels.add(x, y), x, x, platform="cuda")
    deflated = len(full_deflates)
    jtr.clear_caches()
    capture_one(lambda x, y: kernels.add(x, y), x, x, platform="cuda")
    assert len(full_deflates) == 2 * deflated > 0


def test_a_repetitive_piece_is_still_compressed():
    piece = b"".join(f"ld.global.f32 %f{i}, [%rd{i}];\n".encode() for i in range(3000))
    assert len(_proto.compress(b"x" + piece + b"y", [_proto.deflated(piece)])) < len(piece) / 4


@pytest.mark.parametrize("seed", range(8))
def test_the_streams_adler32_combines_each_pieces_as_zlib_computes_it(seed):
    # zlib checks the stream's Adler-32, which `compress` combines from each piece's own.
    rng = random.Random(seed)
    first = rng.randbytes(rng.choice([0, 1, 300]))
    second = rng.randbytes(rng.choice([0, 5, 65521, 200_000]))
    pieces = [_proto.deflated(second)] if second else []
    assert zlib.decompress(_proto.compress(first + second, pieces)) == first + second


def test_jaxlibs_inflater_reads_a_stream_of_pieces():
    image = _proto.KernelImage("k", 4, 1, 0, "digest", 90, "ttir " * 500,
                               object_file=random.Random(0).randbytes(20_000))
    serialized = _proto.encode_call(_proto.KernelCall(image, (3, 1, 1), ()), name="n",
                                    metadata=b"kept")
    opaque = _proto.compress(serialized, [image.piece])
    assert opaque_metadata(opaque) == b"kept"


def test_lowering_at_a_new_shape_reuses_the_deflated_kernel(full_deflates):
    def lowered(length):  # a new function each time: JAX's own caches never answer
        x = spec((length,), jnp.float32)
        return capture_one(lambda x, y: kernels.add(x, y), x, x, platform="cuda")

    first = lowered(4096)
    deflated = len(full_deflates)
    second = lowered(4112)
    assert second.kernels == first.kernels  # the same binary: n is a runtime scalar
    assert second.serialized != first.serialized
    assert len(full_deflates) == deflated
    assert zlib.decompress(second.opaque) == second.serialized
