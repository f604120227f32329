"""`hpdsl train`: run a strategy for K steps on N processes (gloo on CPU, NCCL on CUDA) beside the estimate.

The command checks every flag and prices the strategy first (the estimator, in
this process), then launches torchrun with hpdsl/torch/train.py as the worker
(hpdsl/torch/launch.py owns the job: no process of it outlives the command) and
reads back rank 0's gathered JSON. The trainer's flags, metrics and a
multi-node recipe: docs/trainer.md. The options live in hpdsl/cli/train_options.py, the
job in hpdsl/cli/train_launch.py, the report in hpdsl/cli/train_report.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hpdsl.cli.app import emit_json, json_option
from hpdsl.cli.options import flag_options, model_option, no_stdlib_option, set_option, spec_paths
from hpdsl.cli.train_launch import TrainPlan, launch, plan_from_flags, plan_training, run_training, runnable_reasons
from hpdsl.cli.train_options import SEED_MAX, TRAIN_FLAGS, TrainOptions, data_source, endpoint, finite
from hpdsl.cli.train_report import not_finite, render_train
from hpdsl.errors import BuildError

__all__ = ["TRAIN_FLAGS", "TrainOptions", "TrainPlan", "launch", "plan_from_flags", "plan_training", "render_train",
           "run_training", "runnable_reasons", "train_command"]


@click.command("train")
@spec_paths
@model_option
@no_stdlib_option
@flag_options(TRAIN_FLAGS)
@set_option
@click.option("--nproc", type=click.IntRange(1, 4096), required=True,
              help="processes per node (all nodes: dp·tp·pp·cp of the strategy)")
@click.option("--steps", type=click.IntRange(1, 10**7), default=3, show_default=True, help="training steps")
@click.option("--seed", type=click.IntRange(0, SEED_MAX), default=0, show_default=True,
              help="seed of the weights and the synthetic tokens")
@click.option("--timeout", "timeout_s", type=click.IntRange(1, 10**7), default=600, show_default=True,
              help="seconds before the whole job is stopped")
@click.option("--device", "run_device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="cpu: gloo; cuda: NCCL, one GPU per process (LOCAL_RANK)")
@click.option("--validate", is_flag=True,
              help="also train the unsharded model in one process and compare losses and step 0's gradients")
@click.option("--lr", type=float, default=1e-3, show_default=True, callback=finite(0.0, above=True),
              help="peak learning rate (AdamW)")
@click.option("--warmup", type=click.IntRange(0, 10**7), default=0, show_default=True,
              help="steps of linear warmup to --lr")
@click.option("--schedule", type=click.Choice(["constant", "cosine", "linear"]), default="constant",
              show_default=True, help="decay after warmup, to 0 at the last step")
@click.option("--clip", type=float, default=None, callback=finite(0.0, above=True),
              help="clip the global gradient norm to this (every mesh's norms combined)")
@click.option("--checkpoint", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="folder of torch.distributed.checkpoint saves (model, optimizer, schedule, data position)")
@click.option("--checkpoint-every", type=click.IntRange(1, 10**7), default=None, help="save every N steps")
@click.option("--resume", is_flag=True, help="continue from the newest save in --checkpoint")
@click.option("--data", callback=data_source, default=None,
              help="token file (uint16/uint32 .bin or .npy), a dataset folder saved by datasets' save_to_disk, or "
                   "hf:NAME[:SPLIT] (Hugging Face datasets: pip install 'hpdsl[data]'); default: synthetic tokens")
@click.option("--tokenizer", default=None,
              help="tokenise a dataset's text column with this transformers tokenizer (a name or a folder)")
@click.option("--data-column", default=None,
              help="the dataset's column: token ids (default input_ids) or, with --tokenizer, text (default text)")
@click.option("--data-dtype", type=click.Choice(["uint16", "uint32"]), default="uint16", show_default=True,
              help="the width of a .bin token file's ids")
@click.option("--nnodes", type=click.IntRange(1, 4096), default=1, show_default=True, help="nodes of the job")
@click.option("--node-rank", type=click.IntRange(0, 4095), default=0, show_default=True, help="this node's index")
@click.option("--rdzv-endpoint", default=None, callback=endpoint,
              help="HOST:PORT where the nodes meet (torchrun's c10d rendezvous)")
@click.option("--print-command", is_flag=True, help="print the torchrun command for a scheduler instead of running")
@json_option
def train_command(paths: tuple[Path, ...], model: str | None, no_stdlib: bool, sets: tuple[str, ...],
                  nproc: int, timeout_s: int, print_command: bool, as_json: bool, steps: int, seed: int,
                  run_device: str, validate: bool, lr: float, warmup: int, schedule: str, clip: float | None,
                  checkpoint: Path | None, checkpoint_every: int | None, resume: bool, data: str | None,
                  tokenizer: str | None, data_column: str | None, data_dtype: str, nnodes: int, node_rank: int, rdzv_endpoint: str | None, **flags: Any) -> None:
    """Train a strategy K steps on N processes; print the losses, metrics and measured bytes beside the estimate.

    \b
    Examples:
      hpdsl train examples/mixtral_8x7b.hpf --dp 4 --ep 2 --zero os+grad+params --nproc 4 \\
          --set layers=2 --set hidden=64 --set heads=4 --set kv_heads=2 --set vocab=128 --set experts=4 --set expert_width=32
      hpdsl train examples/llama3_8b.hpf --dp 16 --zero os+grad+params --precision bf16-mixed --device cuda \\
          --seq-len 8192 --nproc 8 --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29500 --steps 1000 --lr 3e-4 \\
          --warmup 100 --schedule cosine --print-command   # the torchrun line for node 0 of a 2-node GPU job
    """
    plan, strategy = plan_from_flags(paths, model, no_stdlib, sets, nproc, TrainOptions(
        steps=steps, seed=seed, device=run_device, validate=validate, lr=lr, warmup=warmup, schedule=schedule, clip=clip,
        checkpoint=None if checkpoint is None else str(checkpoint.resolve()), checkpoint_every=checkpoint_every,
        resume=resume, data=data, tokenizer=tokenizer, data_column=data_column, data_dtype=data_dtype, nnodes=nnodes,
        node_rank=node_rank, rdzv_endpoint=rdzv_endpoint), flags)
    if print_command:
        from hpdsl.torch.launch import shell_line

        click.echo(shell_line(plan.command(json.dumps(plan.config), "hpdsl-train-out")))
        return
    result = launch(plan, timeout_s)
    if result is None:
        click.echo(f"node {node_rank}: its ranks finished; the job's results are on node 0", err=True)
        return
    if as_json:
        emit_json(result)
    else:
        click.echo(render_train(plan.name, strategy, result))
    if (diverged := not_finite(result["loss"])) is not None:
        # The report stands (the steps ran); the exit status says the training did not.
        raise BuildError(f"training diverged: the loss became {result['loss'][diverged]} at step {diverged}. Hint: "
                         "a lower --lr, or --clip; --validate compares with one process (a parallel plan that "
                         "diverges where one process does not is a bug in hpdsl)")

