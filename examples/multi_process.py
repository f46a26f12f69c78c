"""A Triton kernel in a computation spread over processes joined by `jax.distributed`.

Each process owns one device (one GPU, or the CPU). Together they hold a global array sharded
over all devices; a jitted `shard_map` runs a Triton kernel (out = alpha * x + y) on every shard,
and a global sum (a cross-process collective) checks the result, as does each process for its own
shards.

One host, two processes (one GPU each, or two CPU processes where there is no GPU, the kernel then
running in Triton's interpreter):

    python examples/multi_process.py

This starts the two workers on 127.0.0.1 with a free port and waits for them. Across hosts, start
one worker per host (or per GPU) yourself, each naming the same coordinator (the address of
process 0's host, and a port open between the hosts):

    python examples/multi_process.py worker --coordinator 10.0.0.1:12345 \\
        --num-processes 2 --process-id 0        # on the first host
    python examples/multi_process.py worker --coordinator 10.0.0.1:12345 \\
        --num-processes 2 --process-id 1        # on the second host

A worker uses the GPUs it sees (set CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES to give it one), or
the CPU with `--platform cpu`. It first waits for the coordinator and the other processes to
join, saying so; if they have not all joined within `--join-timeout` seconds (default 300), it
gives up with a message saying what to check, and exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import jax_triton_rocm as jtr

SHARD = 4096
ALPHA = 2.0


@triton.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def axpy(x: jax.Array, y: jax.Array) -> jax.Array:
    """alpha * x + y through the Triton kernel."""
    return jtr.triton_call(x, y, ALPHA, x.size, kernel=axpy_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, 1024),), BLOCK=1024)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join(coordinator: str, num_processes: int, process_id: int, join_timeout: float) -> None:
    """`jax.distributed.initialize`, saying what it waits for, and giving up with a message
    (exit status 1) after `join_timeout` seconds: past its own timeout JAX aborts the process
    with a C++ stack trace instead."""
    who = f"process {process_id}/{num_processes}"
    if process_id == 0:
        waiting = (f"the other {num_processes - 1} process(es) to join this coordinator at "
                   f"{coordinator}")
        fix = (f"start them, each with --coordinator {coordinator} and its own --process-id, "
               f"and check that the port is open between the hosts")
    else:
        waiting = f"the coordinator (process 0) at {coordinator} and the other processes"
        fix = ("start process 0 on that host with the same --coordinator, check the address and "
               "that the port is open between the hosts")
    print(f"{who}: waiting up to {join_timeout:g} s for {waiting} (--join-timeout)", flush=True)

    def give_up():
        print(f"{who}: gave up after {join_timeout:g} s waiting for {waiting}: {fix}, or wait "
              f"longer with --join-timeout SECONDS", file=sys.stderr, flush=True)
        os._exit(1)

    watchdog = threading.Timer(join_timeout, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        # JAX's own deadline comes after the watchdog's, so the message above is what is seen.
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id,
                                   initialization_timeout=int(join_timeout) + 60)
    finally:
        watchdog.cancel()


def worker(coordinator: str, num_processes: int, process_id: int, platform: str | None,
           join_timeout: float) -> None:
    """One process: joins the others, runs the sharded kernel, checks and prints the result."""
    if platform:
        jax.config.update("jax_platforms", platform)
    if platform == "cpu":
        # Cross-process collectives (the global sum) between CPU devices.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    join(coordinator, num_processes, process_id, join_timeout)

    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("d",))
    sharding = NamedSharding(mesh, PartitionSpec("d"))
    n = SHARD * len(devices)
    x_host = np.arange(n, dtype=np.float32) / n
    y_host = np.cos(np.arange(n, dtype=np.float32))

    def global_array(host):
        return jax.make_array_from_callback((n,), sharding, lambda index: host[index])

    x, y = global_array(x_host), global_array(y_host)
    sharded_axpy = jax.shard_map(axpy, mesh=mesh, in_specs=(PartitionSpec("d"),) * 2,
                                 out_specs=PartitionSpec("d"))

    @jax.jit
    def step(x, y):
        out = sharded_axpy(x, y)
        return out, jnp.sum(out)

    out, total = step(x, y)
    expected = ALPHA * x_host + y_host
    for shard in out.addressable_shards:
        np.testing.assert_allclose(np.asarray(shard.data), expected[shard.index], rtol=1e-6)
    np.testing.assert_allclose(float(total), float(expected.sum(dtype=np.float64)), rtol=1e-4)
    print(f"process {process_id}/{num_processes}: {len(devices)} devices "
          f"({devices[0].platform}), {len(out.addressable_shards)} local shard(s) match, "
          f"global sum {float(total):.4f} matches", flush=True)
    jax.distributed.shutdown()


def gpu_count() -> int:
    """How many GPUs JAX sees here (0 without one); run in a child, so this process stays clean."""
    code = ("import jax\ntry:\n    print(len(jax.devices('gpu')))\n"
            "except RuntimeError:\n    print(0)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = result.stdout.split()
    return int(lines[-1]) if lines else 0


def launch(num_processes: int, platform: str | None, timeout: float, join_timeout: float) -> int:
    """Starts `num_processes` workers on this host, one device each; returns 0 if all passed."""
    if platform is None:
        platform = None if gpu_count() >= num_processes else "cpu"
    coordinator = f"127.0.0.1:{free_port()}"
    workers = []
    for process_id in range(num_processes):
        env = dict(os.environ)
        if platform != "cpu":
            env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = str(process_id)
        command = [sys.executable, os.path.abspath(__file__), "worker",
                   "--coordinator", coordinator, "--num-processes", str(num_processes),
                   "--process-id", str(process_id), "--join-timeout", str(join_timeout)]
        if platform:
            command += ["--platform", platform]
        workers.append(subprocess.Popen(command, env=env))
    codes = []
    for process in workers:
        try:
            codes.append(process.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait())
    print(f"{num_processes} processes on {platform or 'gpu'}: exit codes {codes}")
    return 0 if all(code == 0 for code in codes) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("launch", "worker"), default="launch")
    parser.add_argument("--num-processes", type=int, default=2)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--coordinator", help="HOST:PORT of process 0 (worker mode)")
    parser.add_argument("--platform", choices=("cpu", "cuda", "rocm"),
                        help="the platform each process uses (default: the GPU if there are "
                             "enough, else the CPU)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for each worker (launch mode)")
    parser.add_argument("--join-timeout", type=float, default=300.0,
                        help="seconds a worker waits for the coordinator and the other processes "
                             "before it gives up with a message (default 300)")
    args = parser.parse_args(argv)
    if args.join_timeout <= 0:
        parser.error(f"--join-timeout must be a positive number of seconds, not "
                     f"{args.join_timeout:g}")
    if args.mode == "worker":
        if not args.coordinator:
            parser.error("worker mode needs --coordinator HOST:PORT")
        worker(args.coordinator, args.num_processes, args.process_id, args.platform,
               args.join_timeout)
        return 0
    return launch(args.num_processes, args.platform, args.timeout, args.join_timeout)


if __name__ == "__main__":
    sys.exit(main())
