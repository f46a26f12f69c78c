"""The CUBIN jaxlib's call carries leaves out the copy of the PTX text that ptxas embeds
(`backends._cuda.without_ptx_text`), and nothing else: checked on CUBINs Triton cross-compiles
for sm_90."""

import dataclasses
import pathlib
import random
import struct
import zlib

import jax.numpy as jnp
import pytest

from jax_triton_rocm.backends import _cuda, _vendors
from jax_triton_rocm.routes.jaxlib import _proto
from tests.support import kernels
from tests.support.binary_utils import check_cubin, elf_sections
from tests.support.lowering_utils import capture_one, spec

PTX_TEXT = ".nv_debug_ptx_txt"
M = spec((64, 128), jnp.float32)


@pytest.fixture(params=["installed plugin", "plugin without module_image"])
def plugin(request, monkeypatch, fresh_caches):
    """The installed CUDA plugin's features, or the same as an older plugin's (jaxlib < 0.11.1
    reads no `module_image`: the PTX text travels in `ptx`)."""
    if request.param != "installed plugin":
        features = _vendors.plugin_features("cuda") or _vendors.assumed_features("cuda")
        old = dataclasses.replace(features, module_image=False)
        monkeypatch.setattr(_vendors, "plugin_features", lambda platform: old)
    return request.param


def _softmax(monkeypatch, keep: str | None):
    if keep is None:
        monkeypatch.delenv("JAX_TRITON_ROCM_KEEP_PTX_TEXT", raising=False)
    else:
        monkeypatch.setenv("JAX_TRITON_ROCM_KEEP_PTX_TEXT", keep)
    lowered = capture_one(kernels.softmax, M, platform="cuda")
    (compiled,) = lowered.kernels
    return lowered, compiled, lowered.calls[0].kernel


def test_the_carried_cubin_is_tritons_but_for_its_ptx_text(monkeypatch, plugin):
    lowered, compiled, image = _softmax(monkeypatch, None)
    built = compiled.binary
    carried = _cuda.without_ptx_text(built)
    if lowered.features.module_image:  # jaxlib 0.11.1+ loads the CUBIN the call carries
        assert image.object_file == carried
    else:  # an older one gets the PTX text in the `ptx` field, and no CUBIN
        assert image.object_file is None and image.ptx == compiled.asm
    check_cubin(carried, 90)
    header_at, offset, size = elf_sections(built)[PTX_TEXT]
    assert size > len(built) // 4  # a third here; 55 to 60% of a real kernel's CUBIN
    assert b".entry softmax_kernel" in built[offset:offset + size]
    # Every byte but the section's data and its header's size field is ptxas's.
    size_field = slice(header_at + 32, header_at + 40)
    outside = [(0, offset), (offset + size, header_at + 32), (header_at + 40, len(built))]
    assert len(carried) == len(built)
    for start, end in outside:
        assert carried[start:end] == built[start:end]
    assert carried[offset:offset + size] == bytes(size)
    assert struct.unpack("<Q", carried[size_field])[0] == 0
    assert elf_sections(carried)[PTX_TEXT] == (header_at, offset, 0)
    # The machine code and the line tables are all there.
    for name, (_, at, length) in elf_sections(built).items():
        if name != PTX_TEXT:
            assert elf_sections(carried)[name][2] == length
            assert carried[at:at + length] == built[at:at + length], name
    # jaxlib keys its loaded modules by the `ptx` field: the digest of what it loads.
    if lowered.features.module_image:
        assert image.ptx == _proto.module_image_ptx(carried)


def test_the_opaque_shrinks_and_the_variable_keeps_the_ptx_text(monkeypatch, plugin):
    stripped, compiled, image = _softmax(monkeypatch, None)
    kept, _, kept_image = _softmax(monkeypatch, "1")
    if not stripped.features.module_image:  # jaxlib < 0.11.1: PTX travels, the same either way
        assert stripped.opaque == kept.opaque and kept_image.object_file is None
        return
    assert kept_image.object_file == compiled.binary
    assert kept_image.ptx == _proto.module_image_ptx(compiled.binary)
    assert len(stripped.opaque) < 0.8 * len(kept.opaque)  # 0.71 here; 0.4 for real kernels
    assert zlib.decompress(stripped.opaque) != zlib.decompress(kept.opaque)


def test_a_file_it_does_not_recognise_comes_back_as_it_was(monkeypatch):
    _, compiled, _ = _softmax(monkeypatch, "1")
    cubin = compiled.binary
    header_at, _, _ = elf_sections(cubin)[PTX_TEXT]
    index = (header_at - struct.unpack_from("<Q", cubin, 0x28)[0]) // 64

    def with_section_field(field_at: int, value: int, fmt: str = "<I") -> bytes:
        edited = bytearray(cubin)
        struct.pack_into(fmt, edited, field_at, value)
        return bytes(edited)

    rela_at = elf_sections(cubin)[".rela.debug_line"][0]
    not_ours = {
        "not an ELF": b"PTX text " * 40,
        "empty": b"",
        "32-bit": cubin[:4] + b"\x01" + cubin[5:],
        "big-endian": cubin[:5] + b"\x02" + cubin[6:],
        "header cut off": cubin[:40],
        "section table cut off": cubin[:struct.unpack_from("<Q", cubin, 0x28)[0] + 10],
        "the section loaded (SHF_ALLOC)": with_section_field(header_at + 8, 0x2, "<Q"),
        "the section not PROGBITS": with_section_field(header_at + 4, 8),
        "the section out of bounds": with_section_field(header_at + 32, len(cubin), "<Q"),
        "relocations against it": with_section_field(rela_at + 44, index),
        "a section linked to it": with_section_field(rela_at + 40, index),
    }
    for why, data in not_ours.items():
        assert _cuda.without_ptx_text(data) == data, why
    # Cut or garbled anywhere, it never raises.
    rng = random.Random(0)
    for _ in range(300):
        data = bytearray(cubin[:rng.randrange(len(cubin) + 1)])
        for _ in range(rng.randrange(4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        _cuda.without_ptx_text(bytes(data))


@pytest.mark.parametrize("module_image", [True, False], ids=["embedded", "path"])
def test_an_hsaco_travels_as_compiled(monkeypatch, fresh_caches, module_image):
    if not module_image:  # a ROCm plugin older than 0.11.1 reads the HSACO from a file
        features = _vendors.plugin_features("rocm") or _vendors.assumed_features("rocm")
        old = dataclasses.replace(features, plugin="jax_rocm7_plugin", module_image=False,
                                  detected_from="jax-rocm7-plugin release 0.10.2")
        monkeypatch.setattr(_vendors, "plugin_features", lambda platform: old)
    lowered = capture_one(kernels.softmax, M, platform="rocm", arch="gfx942")
    (compiled,) = lowered.kernels
    image = lowered.calls[0].kernel
    if image.object_file is not None:  # embedded (jaxlib 0.11.1+)
        assert image.object_file == compiled.binary
    else:  # an older plugin reads the HSACO from the file named in `ptx`
        assert pathlib.Path(image.ptx).read_bytes() == compiled.binary


def test_an_autotuned_calls_cubins_lose_their_ptx_text_once(monkeypatch, fresh_caches):
    # An autotuned call's plan is not kept: each lowering (a new shape here) takes every
    # config's kernel as the call carries it again, the same bytes, emptied once per binary.
    from tests.support import autotune_utils

    monkeypatch.delenv("JAX_TRITON_ROCM_KEEP_PTX_TEXT", raising=False)
    emptied = []
    without_ptx_text = _cuda.without_ptx_text

    def counting(cubin):
        emptied.append(cubin)
        return without_ptx_text(cubin)

    monkeypatch.setattr(_cuda, "without_ptx_text", counting)
    first, second = (capture_one(autotune_utils.tuned_add, autotune_utils.f32(n),
                                 autotune_utils.f32(n), platform="cuda") for n in (4096, 8192))
    configs = len(autotune_utils.ADD_CONFIGS)
    assert len(first.kernels) == len(second.kernels) == configs
    if not first.features.module_image:  # a plugin too old to carry the binary: nothing emptied
        assert emptied == []
        return
    assert len(emptied) == configs
    for a, b in zip(first.calls, second.calls):
        assert a.kernel.object_file is b.kernel.object_file
        assert elf_sections(a.kernel.object_file)[PTX_TEXT][2] == 0  # named, and emptied
