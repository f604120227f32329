"""`hpdsl calibrate`: measure this machine and write a device .hpf the estimator reads (torch needed)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from hpdsl.errors import InputError


@click.command("calibrate")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="the device .hpf to write")
@click.option("--name", default="calibrated", show_default=True, help="the device's name")
@click.option("--ranks", type=int, default=2, show_default=True,
              help="gloo processes measuring at once (the ranks `hpdsl train --nproc` runs)")
@click.option("--threads", type=int, default=1, show_default=True,
              help="torch intra-op threads per process (hpdsl train runs each rank with 1; 0: torch's default)")
def calibrate_command(output: Path, name: str, ranks: int, threads: int) -> None:
    """Measure this machine as `hpdsl train` runs (--ranks processes at once) and write a device .hpf.

    The file declares the device and the cluster NAME_links around it (its measured
    collectives): `--cluster` the file to price with both.

    \b
    Examples:
      hpdsl calibrate -o here.hpf
      hpdsl estimate examples/llama3_8b.hpf --cluster here.hpf
    """
    from hpdsl.api import compile_paths, write_text_atomic

    if ranks < 2:
        raise InputError(f"--ranks must be at least 2 (a collective needs two), got {ranks}")
    if threads < 0:
        raise InputError(f"--threads must be 0 (torch's default) or more, got {threads}")
    if not name.isidentifier():
        raise InputError(f"--name must be a name (letters, digits, '_'), got '{name}'")
    try:
        from hpdsl.torch.calibrate import calibrate, device_text
    except ImportError as error:
        raise InputError(f"hpdsl calibrate needs torch: {error}") from None
    measured = calibrate(ranks, threads or None)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    write_text_atomic(output, device_text(name, measured, memory))
    compile_paths([output], stdlib=False)  # what it wrote compiles, or the error says why
    click.echo(f"wrote {output}: peak {max(f for _, f in measured.matmul) / 1e9:,.1f} GFLOP/s, memory "
               f"{measured.memory_bandwidth / 1e9:,.1f} GB/s, all-reduce {measured.collective_bandwidth / 1e9:,.2f} GB/s, "
               f"op {measured.op_overhead * 1e6:,.0f} us, message step {measured.link_latency * 1e6:,.0f} us, "
               f"optimizer {measured.optimizer_bandwidth / 1e9:,.2f} GB/s, tensor {measured.tensor_overhead * 1e6:,.0f} us, "
               f"DTensor {measured.dtensor_overhead * 1e6:,.0f} us, DTensor op "
               f"{measured.dtensor_op_overhead * 1e6:,.0f} us, FSDP2 unit {measured.shard_overhead * 1e6:,.0f} us, "
               f"overlap {measured.comm_overlap:.2f}, eager call {measured.call_overhead * 1e6:,.1f} us, "
               f"eager elementwise {measured.eager_bandwidth / 1e9:,.2f} GB/s, "
               + ", ".join(f"{c} {bw / 1e9:,.2f} GB/s" for c, bw in measured.collectives)
               + f" ({ranks} ranks at once, "
               f"{measured.threads} threads each)")
