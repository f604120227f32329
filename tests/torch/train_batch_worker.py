"""One rank of a batch of `hpdsl train` jobs run in turn in one torchrun launch (tests/torch/train_batch.py).

`python -m torch.distributed.run ... train_batch_worker.py CONFIGS OUT_DIR`: CONFIGS is a
JSON list of worker configs, as `hpdsl train` writes them; config i runs as hpdsl/torch/train.py
runs it (`run`: its own process group, joined and destroyed, its own seeds), its result in
OUT_DIR/i/result.json. The ranks import torch and hpdsl once for the whole batch.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from hpdsl.torch import train


def main(argv: list[str]) -> int:
    """Run every config of the batch on this rank, one after the other, each in a fork with a store of its own.

    The fork keeps what this process imported and starts torch.distributed afresh: torch keeps some
    state of a destroyed process group's objects (a name cached by a pipeline run was once looked up
    by the next run and not found).
    """
    configs = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    if any(int(config["strategy"].get("pp", 1)) > 1 for config in configs):
        # hpdsl/torch/steps.py imports torch.distributed.pipelining for a pp > 1 run only: import it once
        # here, before the forks, rather than once in each run's fork.
        import hpdsl.torch.pipeline_stage  # noqa: F401
    for index, config in enumerate(configs):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os._exit(_run(index, config, Path(argv[1]) / str(index)))
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            return 1
    return 0


def _run(index: int, config: dict, out: Path) -> int:
    """Run config `index` in this (forked) process; return its exit code, the traceback on stderr if it failed."""
    try:
        train.watch_parents()
        agent = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=timedelta(seconds=600))
        _own_store(agent, index)
        train.run(config, out)
        return 0
    except BaseException:  # noqa: BLE001 - the fork must exit with a code, never return into the loop
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _own_store(agent: dist.TCPStore, index: int) -> None:
    """Point env:// at a fresh store for run `index`, served by rank 0 on a port it tells the others.

    torch names process groups by a counter (from 0 in each fork) or by their ranks, so a
    second run's groups would read the first one's keys in the agent's store.
    """
    if os.environ["RANK"] == "0":
        with socket.socket() as probe:
            probe.bind((os.environ["MASTER_ADDR"], 0))
            port = str(probe.getsockname()[1])
        agent.set(f"hpdsl-batch/{index}", port)
    else:
        port = agent.get(f"hpdsl-batch/{index}").decode()
    os.environ.update(MASTER_PORT=port, TORCHELASTIC_USE_AGENT_STORE="False")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main(sys.argv[1:]))
