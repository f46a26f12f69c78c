"""examples/multi_process.py: two processes joined by jax.distributed, a Triton kernel per shard."""

import pytest

from tests.support.subprocess_utils import check_both_processes_matched, run_multi_process_example


@pytest.mark.process
def test_two_cpu_processes_run_the_kernel_on_their_shards():
    check_both_processes_matched(run_multi_process_example("--platform", "cpu"), "cpu")


def _port_nothing_listens_on() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.process
@pytest.mark.parametrize("process_id,waits_for", [
    (1, "the coordinator (process 0) at {coordinator} and the other processes"),
    (0, "the other 1 process(es) to join this coordinator at {coordinator}"),
])
def test_a_worker_left_alone_says_what_it_waits_for_and_gives_up_after_the_join_timeout(
        process_id, waits_for):
    coordinator = f"127.0.0.1:{_port_nothing_listens_on()}"
    result = run_multi_process_example("worker", "--coordinator", coordinator,
                                       "--process-id", str(process_id), "--platform", "cpu",
                                       "--join-timeout", "2")
    waits_for = waits_for.format(coordinator=coordinator)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert (f"process {process_id}/2: waiting up to 2 s for {waits_for} (--join-timeout)"
            in result.stdout), result.stdout[-3000:]
    [gave_up] = [line for line in result.stderr.splitlines() if "gave up" in line]
    assert gave_up.startswith(f"process {process_id}/2: gave up after 2 s waiting for {waits_for}")
    assert gave_up.endswith("or wait longer with --join-timeout SECONDS"), gave_up


@pytest.mark.process
def test_a_join_timeout_that_is_not_positive_is_refused():
    result = run_multi_process_example("worker", "--coordinator", "127.0.0.1:1",
                                       "--join-timeout", "0")
    assert result.returncode == 2
    assert "--join-timeout must be a positive number of seconds, not 0" in result.stderr
