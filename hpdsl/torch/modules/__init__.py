"""Reference torch modules for hpdsl's standard families (the names families/*.hpf import)."""

from hpdsl.torch.modules.attention import Attention, RingAttention
from hpdsl.torch.modules.common import LayerNorm, RMSNorm
from hpdsl.torch.modules.deltanet import ChunkedGatedDeltaNet, EagerGatedDeltaNet, GatedDeltaNet
from hpdsl.torch.modules.embedding import Embedding, InputProjection, MTPProjection, OutputHead, OutputProjection
from hpdsl.torch.modules.experts import ExpertParallelExperts, GroupedExperts, MXFP8GroupedExperts
from hpdsl.torch.modules.gate import TanhGate
from hpdsl.torch.modules.mamba import Mamba, Mamba2
from hpdsl.torch.modules.mla import MLAttention, RingMLAttention
from hpdsl.torch.modules.mlp import MLP, GatedMLP, PlainMLP
from hpdsl.torch.modules.position_bias import RelativePositionBias
from hpdsl.torch.modules.compressed import CompressedAttention
from hpdsl.torch.modules.hyper import HyperConnection, HyperHead
from hpdsl.torch.modules.moe import (HashRouter, MoE, MoEBesideMLP, MoELatentProjection, Router, ScaledRouter,
                                     SharedExpertGate)
from hpdsl.torch.modules.per_layer import PerLayerInput
from hpdsl.torch.modules.short_conv import ShortConv

__all__ = ["Attention", "ChunkedGatedDeltaNet", "CompressedAttention", "HashRouter", "HyperConnection", "HyperHead", "EagerGatedDeltaNet", "Embedding", "ExpertParallelExperts",
           "GatedDeltaNet", "GatedMLP", "GroupedExperts", "InputProjection", "LayerNorm", "Mamba", "Mamba2", "MLAttention",
           "MLP", "MoE", "MoEBesideMLP", "MoELatentProjection", "MTPProjection", "MXFP8GroupedExperts", "OutputHead", "OutputProjection", "PerLayerInput",
           "PlainMLP",
           "RelativePositionBias",
           "RMSNorm", "RingAttention",
           "RingMLAttention", "Router", "ScaledRouter", "SharedExpertGate", "ShortConv", "TanhGate"]
