"""A damaged entry in Triton's on-disk cache: found before its binary is used, compiled again and
replaced, with one warning naming the damaged file."""

import errno
import json
import logging
import os
import re
import threading

import jax.numpy as jnp
import pytest
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import jax_triton_rocm as jtr
from jax_triton_rocm.compile import _cache, _errors
from tests.support import kernels
from tests.support.binary_utils import carried_form
from tests.support.cache_entries import BINARY, MACHINE, entry_file, garbage, truncate
from tests.support.lowering_utils import captured_lowerings, lower_for, spec

X = spec((4096,), jnp.float32)
ASM = {"cuda": "ptx", "rocm": "amdgcn"}
TARGETS = {"cuda": GPUTarget("cuda", 90, 32), "rocm": GPUTarget("hip", "gfx942", 64)}
BACKEND = {"cuda": "cuda", "rocm": "hip"}
OTHER = {"cuda": "rocm", "rocm": "cuda"}


def binary_reaching_the_call(platform: str) -> bytes:
    """The binary the lowered call carries (checked against what the kernel call embeds)."""
    jtr.clear_caches()  # JAX's lowering cache too: the kernel is looked up afresh
    with captured_lowerings() as captured:
        lowered = lower_for(kernels.add, X, X, platform=platform)
    binary = captured[0].kernels[0].binary
    embedded = jtr.kernel_calls(lowered)[0].message.kernel_call.kernel.module_image.object_file
    assert not embedded or embedded == carried_form(binary, platform)
    return binary


def _empty(path, platform, cache_dir):
    open(path, "wb").close()


def _other_vendors_binary(path, platform, cache_dir):
    with open(entry_file(cache_dir, OTHER[platform], "." + BINARY[OTHER[platform]]), "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data)


def _garbled_json(path, platform, cache_dir):
    with open(path, "w") as f:
        f.write('{"hash": "3f2a", "targ')


def _drop_field(field):
    def drop(path, platform, cache_dir):
        with open(path) as f:
            meta = json.load(f)
        del meta[field]
        with open(path, "w") as f:
            json.dump(meta, f)
    return drop


def _other_vendors_metadata(path, platform, cache_dir):
    with open(entry_file(cache_dir, OTHER[platform], "add_kernel.json")) as f:
        data = f.read()
    with open(path, "w") as f:
        f.write(data)


def _not_text(path, platform, cache_dir):
    with open(path, "wb") as f:
        f.write(b"\xff\xfe\x00\x9c" * 64)


def _set_field(field, value):
    def change(path, platform, cache_dir):
        with open(path) as f:
            meta = json.load(f)
        meta[field] = value
        with open(path, "w") as f:
            json.dump(meta, f)
    return change


def _edit_libraries(new_path):
    """The metadata's extern libraries, each [name, path] given the path `new_path(path)`."""
    def edit(path, platform, cache_dir):
        with open(path) as f:
            meta = json.load(f)
        assert meta["extern_libs"], meta
        meta["extern_libs"] = [[name, new_path(lib)] for name, lib in meta["extern_libs"]]
        with open(path, "w") as f:
            json.dump(meta, f)
    return edit


def _deeply_nested(path, platform, cache_dir):
    with open(path, "w") as f:
        f.write("[" * 100_000 + "]" * 100_000)


def another_kernels_file(platform: str, ext: str):
    """The file `ext` ("cubin", "ttir", ...) of another kernel (`sized_add_kernel`) compiled for
    `platform`, from a cache folder of its own."""
    folder = os.environ["TRITON_CACHE_DIR"]
    os.environ["TRITON_CACHE_DIR"] = folder + "-other"
    try:
        source = ASTSource(kernels.sized_add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                      "n": "constexpr", "out_ptr": "*fp32",
                                                      "BLOCK": "constexpr"},
                           constexprs={(2,): 4096, (4,): 256})
        return triton.compile(source, target=TARGETS[platform]).asm[ext]
    finally:
        os.environ["TRITON_CACHE_DIR"] = folder


def _another_kernels(ext):
    def replace(path, platform, cache_dir):
        data = another_kernels_file(platform, ASM[platform] if ext == "ASM" else
                                    BINARY[platform] if ext == "BINARY" else ext)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
    return replace


def _edit_text(pattern, replace):
    def edit(path, platform, cache_dir):
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(re.sub(pattern, replace, text, count=1))
    return edit


_doubled_threads = _edit_text(r"(reqntid|max_flat_workgroup_size:)(\s+)(\d+)",
                              lambda m: f"{m[1]}{m[2]}{2 * int(m[3])}")


def _asm_listed_under_another_name(path, platform, cache_dir):
    with open(path) as f:
        children = json.load(f)["child_paths"]
    asm = children.pop(f"add_kernel.{ASM[platform]}")
    os.rename(asm, asm[:-len(ASM[platform])] + "xyz")
    children["add_kernel.xyz"] = asm[:-len(ASM[platform])] + "xyz"
    with open(path, "w") as f:
        json.dump({"child_paths": children}, f)


# (name, file of the entry it damages, damage). Entries for both vendors are in the cache, so the
# other vendor's binary and metadata are at hand.
DAMAGES = [
    ("truncated binary", "BINARY", truncate),
    ("empty binary", "BINARY", _empty),
    ("garbage binary", "BINARY", garbage),
    ("the other vendor's binary", "BINARY", _other_vendors_binary),
    ("deleted binary", "BINARY", lambda path, *_: os.remove(path)),
    ("garbled metadata", "add_kernel.json", _garbled_json),
    ("metadata without num_warps", "add_kernel.json", _drop_field("num_warps")),
    ("metadata without name", "add_kernel.json", _drop_field("name")),
    ("the other vendor's metadata", "add_kernel.json", _other_vendors_metadata),
    ("garbled group file", "__grp__add_kernel.json", _garbled_json),
    ("Triton IR that is not text", ".ttir", _not_text),
    ("metadata with other num_warps", "add_kernel.json", _set_field("num_warps", 8)),
    ("metadata with other num_ctas", "add_kernel.json", _set_field("num_ctas", 2)),
    ("metadata naming another kernel", "add_kernel.json", _set_field("name", "sub_kernel")),
    ("metadata with negative shared memory", "add_kernel.json", _set_field("shared", -1)),
    ("metadata with shared memory the kernel does not use", "add_kernel.json",
     _set_field("shared", 1000)),
    ("metadata naming other library files", "add_kernel.json",
     _edit_libraries(lambda lib: lib[:-len(".bc")] + "-other.bc")),
    ("deeply nested metadata", "add_kernel.json", _deeply_nested),
    ("deeply nested group file", "__grp__add_kernel.json", _deeply_nested),
    ("another kernel's binary", "BINARY", _another_kernels("BINARY")),
    ("another kernel's Triton IR", ".ttir", _another_kernels("ttir")),
    ("another kernel's assembly", "ASM", _another_kernels("ASM")),
    ("assembly for twice the threads per block", "ASM", _doubled_threads),
    ("the assembly under an unexpected name", "__grp__add_kernel.json",
     _asm_listed_under_another_name),
]


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("damage", DAMAGES, ids=[d[0] for d in DAMAGES])
def test_a_damaged_entry_is_compiled_again_with_one_warning_naming_the_file(
        cache_dir, platform, damage, caplog):
    _, which, damage_fn = damage
    whole = binary_reaching_the_call(platform)
    binary_reaching_the_call(OTHER[platform])
    which = {"BINARY": "." + BINARY[platform], "ASM": "." + ASM[platform]}.get(which, which)
    path = entry_file(cache_dir, platform, which)
    damage_fn(path, platform, cache_dir)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        again = binary_reaching_the_call(platform)
        assert binary_reaching_the_call(platform) == again  # the entry was replaced: no warning
    assert _cache.binary_problem(again, BACKEND[platform]) is None
    assert int.from_bytes(again[18:20], "little") == MACHINE[platform]
    assert again == whole
    warnings = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(warnings) == 1 and path in warnings[0], warnings


def kernel_reaching_the_call(platform: str):
    """The package's compiled kernel that the lowered call carries."""
    jtr.clear_caches()
    with captured_lowerings() as captured:
        lower_for(kernels.add, X, X, platform=platform)
    return captured[0].kernels[0]


def damage_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]


def test_ptx_for_clusters_of_another_size_is_damage(cache_dir, caplog):
    kernel_reaching_the_call("cuda")
    path = entry_file(cache_dir, "cuda", ".ptx")
    _edit_text(r"(\.reqntid \d+)", r"\1\n.explicitcluster\n.reqnctapercluster 2")(
        path, "cuda", cache_dir)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        kernel_reaching_the_call("cuda")
    warnings = damage_warnings(caplog)
    assert len(warnings) == 1 and f"{path}: PTX for clusters of 2 blocks, not 1" in warnings[0]


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_metadata_denying_the_shared_memory_a_kernel_uses_is_damage(cache_dir, platform, caplog):
    rows = spec((8, 1024), jnp.float32)

    def softmax_reaching_the_call():
        jtr.clear_caches()
        with captured_lowerings() as captured:
            lower_for(kernels.softmax, rows, platform=platform)
        return captured[0].kernels[0]

    whole = softmax_reaching_the_call()
    assert whole.shared_mem_bytes > 0
    (path,) = [str(p) for p in cache_dir.glob("*/softmax_kernel.json")]
    _set_field("shared", 0)(path, platform, cache_dir)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        assert softmax_reaching_the_call().shared_mem_bytes == whole.shared_mem_bytes
    warnings = damage_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert f"{path}: metadata says shared=0, but the kernel's LLVM IR uses shared memory" in (
        warnings[0])


NOBODY = 65534  # another user's id, to own a planted entry as root


def test_a_link_in_place_of_an_entry_is_replaced_never_written_through(cache_dir, tmp_path,
                                                                          caplog):
    whole = kernel_reaching_the_call("cuda")
    entry = os.path.dirname(entry_file(cache_dir, "cuda", "add_kernel.json"))
    planted = tmp_path / "planted"
    os.rename(entry, planted)
    group_path = planted / "__grp__add_kernel.json"
    children = {child: os.path.join(planted, os.path.basename(path)) for child, path in
                json.loads(group_path.read_text())["child_paths"].items()}
    group_path.write_text(json.dumps({"child_paths": children}))
    with open(planted / "add_kernel.ttir", "a") as f:
        f.write("// PLANTED\n")
    os.symlink(planted, entry)
    owner = os.geteuid()
    if owner == 0:
        owner = NOBODY
        for path in [planted, *planted.iterdir()]:
            os.chown(path, NOBODY, NOBODY)
        os.lchown(entry, NOBODY, NOBODY)
    os.chmod(cache_dir, 0o777)
    before = {path.name: path.read_bytes() for path in planted.iterdir()}
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        again = kernel_reaching_the_call("cuda")
    assert "PLANTED" not in again.ttir and again.binary == whole.binary
    assert {path.name: path.read_bytes() for path in planted.iterdir()} == before
    assert not os.path.islink(entry) and os.path.isdir(entry)
    warnings = damage_warnings(caplog)
    by = f" owned by user id {owner}" if owner != os.geteuid() else ""
    assert len(warnings) == 1 and (
        f"{entry}: a symbolic link{by} in place of the entry's folder" in warnings[0]), warnings


def test_a_link_that_cannot_be_removed_sends_the_compile_to_a_private_folder(
        cache_dir, tmp_path, monkeypatch, caplog):
    whole = kernel_reaching_the_call("cuda")
    entry = os.path.dirname(entry_file(cache_dir, "cuda", "add_kernel.json"))
    os.rename(entry, tmp_path / "planted")
    os.symlink(tmp_path / "planted", entry)
    unlink = os.unlink

    def sticky_folder_unlink(path, *args, **kwargs):  # another user's link under the sticky bit
        if path == entry:
            raise PermissionError(errno.EPERM, "Operation not permitted", path)
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", sticky_folder_unlink)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        assert kernel_reaching_the_call("cuda").binary == whole.binary
    assert os.path.islink(entry)
    assert any("cannot be written" in r.getMessage() and entry in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


# Where another virtual environment, sharing the default cache folder, keeps Triton's libraries.
OTHER_VENV = "/home/user/venv-3.13/lib/python3.13/site-packages/triton/backends/lib"


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_libraries_in_another_virtual_environment_are_the_same_kernel(
        cache_dir, platform, caplog):
    whole = binary_reaching_the_call(platform)
    path = entry_file(cache_dir, platform, "add_kernel.json")
    _edit_libraries(lambda lib: os.path.join(OTHER_VENV, os.path.basename(lib)))(
        path, platform, cache_dir)
    with open(path) as f:
        written_by_the_other = f.read()
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        assert binary_reaching_the_call(platform) == whole
    assert not damage_warnings(caplog)
    with open(path) as f:  # not compiled again: a compile would name this venv's libraries
        assert f.read() == written_by_the_other


SECRET = "tt.func public @add_kernel() { SECRET of another user }"


@pytest.mark.parametrize("how", ["a link in the entry", "a path outside the entry"])
def test_a_file_outside_the_entry_is_never_read(cache_dir, tmp_path, how, caplog):
    whole = kernel_reaching_the_call("cuda")
    secret = tmp_path / "secret.ttir"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    path = entry_file(cache_dir, "cuda", ".ttir")
    if how == "a link in the entry":
        os.remove(path)
        os.symlink(secret, path)
        named = path
    else:
        group_path = entry_file(cache_dir, "cuda", "__grp__add_kernel.json")
        with open(group_path) as f:
            children = json.load(f)["child_paths"]
        children["add_kernel.ttir"] = named = str(secret)
        with open(group_path, "w") as f:
            json.dump({"child_paths": children}, f)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        again = kernel_reaching_the_call("cuda")
    assert "SECRET" not in again.ttir and again.ttir == whole.ttir
    warnings = damage_warnings(caplog)
    assert len(warnings) == 1 and named in warnings[0], warnings


def test_a_fifo_in_the_entry_is_refused_without_waiting(cache_dir, caplog):
    kernel_reaching_the_call("cuda")
    path = entry_file(cache_dir, "cuda", ".ttir")
    os.remove(path)
    os.mkfifo(path)
    outcome = []
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        thread = threading.Thread(
            target=lambda: outcome.append(kernel_reaching_the_call("cuda")), daemon=True)
        thread.start()
        thread.join(60)
        blocked = thread.is_alive()
        if blocked:  # a read waits on the FIFO: open its other end to free it
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(10)
    assert not blocked and outcome and outcome[0].binary
    warnings = damage_warnings(caplog)
    assert len(warnings) == 1 and f"{path}: a FIFO, not a regular file" in warnings[0], warnings


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_metadata_changed_after_the_compile_never_reaches_the_launch(cache_dir, platform):
    whole = kernel_reaching_the_call(platform)
    path = entry_file(cache_dir, platform, "add_kernel.json")
    _set_field("num_warps", whole.num_warps * 2)(path, platform, cache_dir)
    again = kernel_reaching_the_call(platform)
    assert (again.num_warps, again.name, again.binary) == (whole.num_warps, whole.name,
                                                           whole.binary)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_binary_damaged_after_the_check_is_caught_before_it_is_used(
        cache_dir, platform, monkeypatch, caplog):
    whole = binary_reaching_the_call(platform)
    path = entry_file(cache_dir, platform, "." + BINARY[platform])

    def damage_instead_of_checking(*args):  # another process truncates it meanwhile
        truncate(path, platform, cache_dir)
        return None  # the entry passed its check

    monkeypatch.setattr(_cache, "entry_problem", damage_instead_of_checking)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        assert binary_reaching_the_call(platform) == whole
    assert sum(path in r.getMessage() for r in caplog.records) == 1


def test_a_binary_still_damaged_after_replacing_is_an_error_that_is_not_remembered(
        cache_dir, monkeypatch):
    # Every binary Triton returns reads as damaged (the cache starts empty: nothing is checked
    # before the first compile).
    monkeypatch.setattr(_cache, "binary_problem", lambda *args: "truncated: 12 bytes")
    with pytest.raises(_cache.DamagedEntry, match="add_kernel.cubin: truncated.*Delete"):
        binary_reaching_the_call("cuda")
    monkeypatch.undo()
    lowered = lower_for(kernels.add, X, X, platform="cuda")  # no clear_caches: not remembered
    assert len(jtr.kernel_calls(lowered)) == 1


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_the_entry_checked_is_the_one_triton_compile_reads(cache_dir, platform, monkeypatch):
    pairs = []
    compile_fn = triton.compile

    def recording_compile(source, target=None, options=None):
        compiled = compile_fn(source, target=target, options=options)
        pairs.append((_cache.compile_request(source, target, options).entry_hash, compiled.hash))
        return compiled

    monkeypatch.setattr(triton, "compile", recording_compile)
    binary_reaching_the_call(platform)
    assert pairs and all(ours == tritons for ours, tritons in pairs), pairs


def test_an_unreadable_cache_file_is_no_error_of_the_kernel():
    assert not _errors.is_kernel_error(json.JSONDecodeError("Expecting value", "x", 0))
    assert not _errors.is_kernel_error(_cache.DamagedEntry("damaged"))
