"""The first result of a fresh process, cold (an empty Triton cache) and warm (a second process on
it), with JAX's persistent compilation cache off and on: the package against Triton's own launcher
from PyTorch.

`python benchmarks/first_result.py` (on a GPU machine) runs each side of each kernel in a fresh
process and times the span from the first call to its result on the host: imports, the
backend's start and the inputs are made before the span; the span holds what a user waits for
at the first call (tracing, lowering and compiling the kernel, XLA's compile of the program,
loading the binary, the launch). Each side runs twice on one cache folder: first with an empty
`TRITON_CACHE_DIR` ("cold"), then a second process on the same folder ("warm": Triton's binaries
are there). The package runs with JAX's persistent compilation cache off (JAX's default) and on
(`JAX_COMPILATION_CACHE_DIR` in the same folder, every compile kept): a warm process then reads
XLA's executable back instead of compiling the program again.

Kernels, as Triton's tutorials write them (`_real_kernels.py`): the row softmax, the layer-norm
forward, and the fp16 matmul autotuned over the matmul tutorial's eight CUDA configs (Triton's
autotuner times them on the first call; the package compiles them in parallel and jaxlib times
them at the first execution). Prints one table: seconds per side and the package's ratio to
PyTorch, cold and warm; `--json PATH` writes it too.

`program`: the real kernels of `real_kernels.py` together (softmax, layer-norm forward and
backward, dropout, matmul, attention: `_real_cases.py`, at its sizes), called once each in one
`jax.jit`, whose compiles start as each call is traced and run in parallel; PyTorch's side
launches each once, in turn, as its first launch compiles it. Each kernel's result is checked
against its jax.numpy reference (PyTorch's on the CPU, after the span).

`--check-on-cpu` needs no GPU: the package's side at small sizes in Triton's interpreter (JAX on
the CPU), each in a fresh process as on the GPU, its results checked against jax.numpy; the
PyTorch side is left out.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("--check-on-cpu", "--worker"))

import argparse
import json
import os
import sys
import tempfile
import time

KERNELS = ("softmax", "layernorm", "matmul", "program")
# The kernels of `program`, by their names in `_real_cases.py`.
PROGRAM = ("softmax", "layernorm", "layernorm_bwd", "dropout", "matmul", "attention")
SIZES = {
    "gpu": {"softmax": (4096, 8192), "layernorm": (4096, 8192), "matmul": (4096, 4096, 4096)},
    "cpu": {"softmax": (8, 64), "layernorm": (8, 64), "matmul": (32, 32, 32)},
}
# The matmul tutorial's CUDA configs: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps).
TUTORIAL_CONFIGS = (
    (128, 256, 64, 8, 3, 8), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4), (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4),
    (64, 32, 32, 8, 5, 2), (32, 64, 32, 8, 5, 2),
)
# In Triton's interpreter each config runs the kernel once more: two small ones are enough.
CPU_CONFIGS = ((16, 16, 16, 1, 1, 1), (32, 32, 16, 1, 1, 1))
TIMEOUT_S = 600


def autotuned_matmul(configs):
    """`_real_kernels.matmul_kernel` under `triton.autotune` over `configs`, keyed on the sizes."""
    import triton

    import _real_kernels as K

    return triton.autotune(
        configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": g},
                               num_stages=stages, num_warps=warps)
                 for m, n, k, g, stages, warps in configs],
        key=["M", "N", "K"])(K.matmul_kernel)


def _grid_1d(meta, m, n):
    import triton

    return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)


def package_call(kernel: str, sizes: tuple, configs):
    """(the jitted call, its inputs, the jax.numpy reference, (atol, rtol)) of `kernel`."""
    import jax
    import jax.numpy as jnp
    import triton

    import jax_triton_rocm as jtr
    import _real_kernels as K

    key = jax.random.PRNGKey(0)
    if kernel == "softmax":
        rows, cols = sizes
        x = jax.random.normal(key, (rows, cols), jnp.float32)
        block = triton.next_power_of_2(cols)

        def call(x):
            return jtr.triton_call(in_ptr=x, in_row_stride=cols, out_row_stride=cols,
                                   n_rows=rows, n_cols=cols, kernel=K.softmax_kernel,
                                   out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                                   grid=(rows,), num_warps=8, BLOCK=block, NUM_STAGES=1)

        return jax.jit(call), (x,), (lambda x: jax.nn.softmax(x, axis=-1)), (1e-6, 1e-5)
    if kernel == "layernorm":
        rows, cols = sizes
        kx, kw, kb = jax.random.split(key, 3)
        x = jax.random.normal(kx, (rows, cols), jnp.float16)
        w = (1 + 0.1 * jax.random.normal(kw, (cols,), jnp.float32)).astype(jnp.float16)
        b = (0.1 * jax.random.normal(kb, (cols,), jnp.float32)).astype(jnp.float16)
        block = min(triton.next_power_of_2(cols), 65536 // 2)

        def call(x, w, b):
            return jtr.triton_call(
                x, W=w, B=b, stride=cols, N=cols, eps=1e-5, kernel=K.layer_norm_fwd_kernel,
                out_type=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                          jax.ShapeDtypeStruct((rows,), jnp.float32),
                          jax.ShapeDtypeStruct((rows,), jnp.float32)),
                grid=(rows,), num_warps=8, BLOCK_SIZE=block)[0]

        def reference(x, w, b):
            xf = x.astype(jnp.float32)
            mean = xf.mean(-1, keepdims=True)
            var = ((xf - mean) ** 2).mean(-1, keepdims=True)
            return ((xf - mean) / jnp.sqrt(var + 1e-5) * w + b).astype(x.dtype)

        return jax.jit(call), (x, w, b), reference, (2e-2, 2e-2)
    m, n, k = sizes
    ka, kb = jax.random.split(key)
    a = jax.random.normal(ka, (m, k), jnp.float16)
    b = jax.random.normal(kb, (k, n), jnp.float16)
    matmul = autotuned_matmul(configs)

    def call(a, b):
        return jtr.triton_call(a_ptr=a, b_ptr=b, M=m, N=n, K=k, stride_am=k, stride_ak=1,
                               stride_bk=n, stride_bn=1, stride_cm=n, stride_cn=1,
                               kernel=matmul, out_type=jax.ShapeDtypeStruct((m, n), a.dtype),
                               grid=lambda meta: _grid_1d(meta, m, n))

    def reference(a, b):
        return (a.astype(jnp.float32) @ b.astype(jnp.float32)).astype(a.dtype)

    return jax.jit(call), (a, b), reference, (0.5, 2e-2)


def torch_call(kernel: str, sizes: tuple, configs):
    """(a function that launches `kernel` by Triton's launcher and returns its output, its
    inputs on the GPU, a float32 reference of the output)."""
    import torch
    import triton

    import _real_kernels as K

    generator = torch.Generator(device="cuda").manual_seed(0)

    def normal(shape, dtype):
        return torch.randn(shape, generator=generator, device="cuda").to(dtype)

    if kernel == "softmax":
        rows, cols = sizes
        x = normal((rows, cols), torch.float32)
        block = triton.next_power_of_2(cols)

        def launch(x):
            out = torch.empty_like(x)
            K.softmax_kernel[(rows,)](out, x, cols, cols, rows, cols, BLOCK=block, NUM_STAGES=1,
                                      num_warps=8)
            return out

        return launch, (x,), lambda x: torch.softmax(x, -1)
    if kernel == "layernorm":
        rows, cols = sizes
        x = normal((rows, cols), torch.float16)
        w = (1 + 0.1 * normal((cols,), torch.float32)).half()
        b = (0.1 * normal((cols,), torch.float32)).half()
        block = min(triton.next_power_of_2(cols), 65536 // 2)

        def launch(x, w, b):
            y = torch.empty_like(x)
            mean = torch.empty((rows,), dtype=torch.float32, device="cuda")
            rstd = torch.empty((rows,), dtype=torch.float32, device="cuda")
            K.layer_norm_fwd_kernel[(rows,)](x, y, w, b, mean, rstd, cols, cols, 1e-5,
                                             BLOCK_SIZE=block, num_warps=8)
            return y

        def reference(x, w, b):
            return torch.nn.functional.layer_norm(x.float(), (cols,), w.float(), b.float(), 1e-5)

        return launch, (x, w, b), reference
    m, n, k = sizes
    a, b = normal((m, k), torch.float16), normal((k, n), torch.float16)
    matmul = autotuned_matmul(configs)

    def launch(a, b):
        c = torch.empty((m, n), dtype=a.dtype, device="cuda")
        matmul[lambda meta: _grid_1d(meta, m, n)](a, b, c, m, n, k, k, 1, n, 1, n, 1)
        return c

    return launch, (a, b), lambda a, b: a.float() @ b.float()


def program_cases(where: str) -> list[tuple]:
    """(case, its sizes, its input arrays) per kernel of `PROGRAM`, the inputs made by JAX."""
    import jax

    import _real_cases

    cases = []
    for index, name in enumerate(PROGRAM):
        case = _real_cases.BY_NAME[name]
        sizes = case.full if where == "gpu" else case.small
        state, consts = case.inputs(sizes, jax.random.key(index))
        cases.append((case, sizes, (*state, *consts)))
    return cases


def program_correct(cases: list[tuple], outputs: list) -> bool:
    """Whether each kernel's outputs (arrays or tensors) are within its case's tolerance of its
    jax.numpy reference."""
    import jax
    import numpy as np

    from _real_measure import max_error

    def leaves(tree):
        return [np.asarray(leaf.float().cpu() if hasattr(leaf, "cpu") else leaf, np.float32)
                for leaf in jax.tree.leaves(tree)]

    return all([max_error(leaves(out), leaves(case.reference(sizes, 0, *arrays)),
                          case.tolerance)[1]
                for (case, sizes, arrays), out in zip(cases, outputs)])


def program_worker(side: str, where: str) -> dict:
    """`worker` for the program: each kernel called once, in one jit (the package) or in turn
    (PyTorch)."""
    import jax

    cases = program_cases(where)
    if side == "package":
        jax.devices()  # the backend's start stays outside the span

        @jax.jit
        def program(arrays):
            return [case.package(sizes, 0, *args) for (case, sizes, _), args in zip(cases, arrays)]

        arrays = jax.block_until_ready([arrays for _, _, arrays in cases])
        start = time.perf_counter()
        outputs = jax.block_until_ready(program(arrays))
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "correct": program_correct(cases, outputs)}
    import torch

    from _real_measure import to_torch

    torch.cuda.init()
    tensors = [[to_torch(array, "cuda") for array in arrays] for _, _, arrays in cases]
    torch.cuda.synchronize()
    start = time.perf_counter()
    outputs = [case.torch(sizes, 0, *args) for (case, sizes, _), args in zip(cases, tensors)]
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "correct": program_correct(cases, outputs)}


def worker(side: str, kernel: str, where: str) -> dict:
    """Runs one side's first call of `kernel` in this (fresh) process; returns its seconds."""
    if kernel == "program":
        return program_worker(side, where)
    sizes = SIZES[where][kernel]
    configs = TUTORIAL_CONFIGS if where == "gpu" else CPU_CONFIGS
    if side == "package":
        import jax
        import numpy as np

        jax.devices()  # the backend's start stays outside the span, as PyTorch's CUDA start does
        fn, inputs, reference, (atol, rtol) = package_call(kernel, sizes, configs)
        inputs = jax.block_until_ready(inputs)
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*inputs))
        seconds = time.perf_counter() - start
        want = np.asarray(reference(*inputs), np.float32)
        correct = bool(np.allclose(np.asarray(out, np.float32), want, atol=atol, rtol=rtol))
        return {"seconds": seconds, "correct": correct}
    import torch

    torch.cuda.init()
    launch, inputs, reference = torch_call(kernel, sizes, configs)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = launch(*inputs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    correct = bool(torch.allclose(out.float(), reference(*inputs).float(), atol=0.5, rtol=2e-2))
    return {"seconds": seconds, "correct": correct}


# (side, JAX's persistent compilation cache on) for each row of the table.
SIDES = (("package", False), ("package", True), ("pytorch", False))


def run_side(kernel: str, side: str, jax_cache: bool, where: str) -> dict:
    """The cold and the warm first result of one side, each in a fresh process, on one fresh
    cache folder."""
    import _common

    with tempfile.TemporaryDirectory(prefix="first-result-") as folder:
        env = {"TRITON_CACHE_DIR": os.path.join(folder, "triton")}
        if jax_cache:
            env.update(JAX_COMPILATION_CACHE_DIR=os.path.join(folder, "jax"),
                       JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                       JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
        if where == "cpu" or side == "pytorch":  # PyTorch's side checks with JAX on the CPU
            env["JAX_PLATFORMS"] = "cpu"
        result = {}
        for state in ("cold", "warm"):
            status, stdout, stderr = _common.run_fresh(
                "first_result.py", ["--worker", side, kernel, where], command_buffers=True,
                timeout_s=TIMEOUT_S, env=env)
            if status != 0:
                return {"problem": f"{side} {kernel} {state}: exit {status}: {stderr[-1500:]}"}
            one = json.loads(stdout.strip().splitlines()[-1])
            result[state] = one["seconds"]
            if not one["correct"]:
                result["problem"] = f"{side} {kernel} {state}: wrong result"
        return result


def table(kernels, where: str) -> list[dict]:
    rows = []
    for kernel in kernels:
        results = {}
        for side, jax_cache in SIDES:
            if side == "pytorch" and where == "cpu":
                continue
            results[side, jax_cache] = run_side(kernel, side, jax_cache, where)
        torch_row = results.get(("pytorch", False), {})
        for (side, jax_cache), result in results.items():
            row = {"kernel": kernel, "side": side,
                   "jax_cache": "on" if jax_cache else "off" if side == "package" else "-",
                   **result}
            for state in ("cold", "warm"):
                if side == "package" and state in result and state in torch_row:
                    row[f"ratio_{state}"] = result[state] / torch_row[state]
            rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    header = ("kernel", "side", "JAX cache", "cold s", "warm s", "cold ratio", "warm ratio")
    cells = [header] + [
        (r["kernel"], r["side"], r["jax_cache"],
         *[f"{r[k]:.3f}" if k in r else "-" for k in ("cold", "warm", "ratio_cold",
                                                       "ratio_warm")]) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for r in rows:
        if "problem" in r:
            print(f"problem: {r['problem']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help=f"comma-separated, of {', '.join(KERNELS)}")
    parser.add_argument("--json", metavar="PATH", help="also write the table as JSON")
    parser.add_argument("--check-on-cpu", action="store_true",
                        help="the package's side only, at small sizes, in Triton's interpreter")
    parser.add_argument("--worker", nargs=3, metavar=("SIDE", "KERNEL", "WHERE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    import _needs

    kernels = _needs.chosen_kernels(parser, args.kernels, KERNELS)
    where = "cpu" if args.check_on_cpu else "gpu"
    rows = table(kernels, where)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"where": where, "rows": rows}, out, indent=1)
        print(f"written to {args.json}")
    return 1 if any("problem" in r for r in rows) else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
