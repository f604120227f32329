"""The PipelineStages and 1F1B schedule of a rank's pipeline chunks (hpdsl/torch/pipeline.py).

Apart from hpdsl/torch/pipeline.py because torch.distributed.pipelining imports torch._dynamo
(about 1.3 CPU-seconds a process): hpdsl/torch/steps.py imports this module only for a pp > 1 run, so
importing hpdsl.torch (the launching `hpdsl train`, `hpdsl explain`, a test process) does not. A process
that builds on the meta device still loads torch._dynamo then (torch's meta-device init goes through
torch/_compile.py), so a training rank saves only pipelining's own import.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed import ProcessGroup
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B
from torch.distributed.pipelining.schedules import _PipelineSchedule
from torch.distributed.pipelining.stage import _PipelineStageBase

from hpdsl.model.strategy import Strategy
from hpdsl.torch.modules.collectives import rank_local
from hpdsl.torch.pipeline import LossFn, StageChunk


class _Stage(PipelineStage):
    """A PipelineStage that tells its chunk which micro-batch it runs (the last chunk's MTP ids are per micro-batch).

    Its shape-inference passes run with the cp hand-offs rank-local (collectives.rank_local):
    the values are thrown away, and the inferred backward skips whatever does not lead to the
    stage's inputs, a Gated DeltaNet's sends to its previous cp rank among them.
    """

    def _prepare_forward_infra(self, *args: Any, **kwargs: Any) -> Any:
        with rank_local():
            return super()._prepare_forward_infra(*args, **kwargs)

    def _prepare_backward_infra(self, *args: Any, **kwargs: Any) -> Any:
        with rank_local():
            return super()._prepare_backward_infra(*args, **kwargs)

    def forward_one_chunk(self, fwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        """Note the micro-batch on the chunk, then run it as PipelineStage does."""
        if isinstance(self.submod, StageChunk):
            self.submod.micro_batch = fwd_chunk_id
        return super().forward_one_chunk(fwd_chunk_id, *args, **kwargs)


def schedule(chunks: dict[int, StageChunk], strategy: Strategy, group: ProcessGroup,
             loss_fn: LossFn, device: torch.device) -> _PipelineSchedule:
    """Return the 1F1B schedule (interleaved when vpp > 1) over this rank's chunks' PipelineStages."""
    total = strategy.pp * strategy.vpp
    stages: list[_PipelineStageBase] = [_Stage(chunk, c, total, device, group=group)
                                        for c, chunk in sorted(chunks.items())]
    if strategy.vpp == 1:
        (stage,) = stages
        return Schedule1F1B(stage, strategy.micro_batches, loss_fn=loss_fn)
    return ScheduleInterleaved1F1B(stages, strategy.micro_batches, loss_fn=loss_fn)


__all__ = ["schedule"]
