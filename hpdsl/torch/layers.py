"""The containers a built model is made of: layers, towers, causal and encoder-decoder language models.

They hold the family-built modules in fixed slots (`mixer`, `cross_attention`,
`ffn`, their norms) and say nothing about which implementation fills a slot;
model.py decides that through the families.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.distributed.tensor import DTensor, Replicate

from hpdsl.errors import BuildError
from hpdsl.torch.modules.position_bias import RelativePositionBias  # re-exported: it lived here


NORM_PATHS = ("mixer_norm", "mixer_post_norm", "cross_norm", "cross_post_norm", "ffn_norm", "ffn_post_norm",
              "per_layer_post_norm")
"""Every norm a layer may hold (hpdsl/bound/wiring.py says which its wiring holds)."""

GATE_PATHS = ("mixer_gate", "cross_gate", "ffn_gate")
"""Every output gate a layer may hold (`wiring gated`: one after each block, before the residual add)."""

HYPER_PATHS = ("mixer_hc", "ffn_hc")
"""Every hyper-connection a layer may hold (hc_mult: DeepSeek-V4's mHC, one before each block's norm)."""


class DecoderLayer(nn.Module):
    """Residual layer: a mixer, an optional cross-attention, a feed-forward (one of the two may be absent).

    `wiring` (hpdsl/bound/wiring.py) says where the norms it holds stand and
    where the residual adds go; a norm the wiring does not hold is None, and so
    is a gate (`wiring gated` holds one per block). A Megatron-style hybrid
    (Nemotron-H) holds a mixer or a feed-forward per layer, never both. A
    cross-attention layer (a kind with `attention cross`) holds no mixer: given
    no stream (`memory`) it passes its input through, as transformers' Mllama
    skips its cross-attention layers on the text-only path.
    """

    mixer_norm: nn.Module | None
    mixer_post_norm: nn.Module | None
    cross_norm: nn.Module | None
    cross_post_norm: nn.Module | None
    ffn_norm: nn.Module | None
    ffn_post_norm: nn.Module | None
    per_layer_post_norm: nn.Module | None

    def __init__(self, *, mixer: nn.Module | None = None, ffn: nn.Module | None = None,
                 cross_attention: nn.Module | None = None, wiring: str = "pre_norm",
                 norms: Mapping[str, nn.Module] | None = None, gates: Mapping[str, nn.Module] | None = None,
                 per_layer_input: nn.Module | None = None, hyper: Mapping[str, nn.Module] | None = None) -> None:
        super().__init__()
        for given, paths in ((norms, NORM_PATHS), (gates, GATE_PATHS), (hyper, HYPER_PATHS)):
            unknown = sorted(set(given or {}) - set(paths))
            if unknown:
                raise BuildError(f"a layer holds no {unknown}; it may hold {list(paths)}")
        self.wiring = wiring
        for path in NORM_PATHS:  # each at its own attribute: the parameter names are the slot paths
            setattr(self, path, (norms or {}).get(path))
        for path in GATE_PATHS:
            setattr(self, path, (gates or {}).get(path))
        for path in HYPER_PATHS:  # with hc_mult the layer reads and writes hc_mult residual streams
            setattr(self, path, (hyper or {}).get(path))
        self.mixer, self.cross_attention, self.ffn = mixer, cross_attention, ffn
        self.per_layer_input = per_layer_input  # Gemma 4's PLE block after the feed-forward (per_layer_width)

    def forward(self, x: Tensor, *, positions: Tensor, bias: Tensor | None = None,
                memory: Tensor | None = None, per_layer: Tensor | None = None, ids: Tensor | None = None) -> Tensor:
        """Return the layer's output for `x` [b, s, h] (memory: the encoder output, for cross-attention).

        `per_layer` is this layer's per-layer input [b, s, per_layer_width] where it has a
        per_layer_input block: its output, through per_layer_post_norm, is added after the feed-forward.
        `ids` are the tokens' ids, which a hash-routed feed-forward picks its experts by (DeepSeek-V4).
        With hyper-connections `x` is the residual streams [b, s, hc_mult, h] (`_hyper`).
        """
        if self.mixer_hc is not None or self.ffn_hc is not None:
            return self._hyper(x, positions=positions, bias=bias, ids=ids)
        x = self._blocks(x, positions=positions, bias=bias, memory=memory, ids=ids)
        block = self.per_layer_input
        if block is None:
            return x
        if per_layer is None:
            raise BuildError("a layer with a per-layer input block needs its per-layer input (per_layer)")
        return x + _apply(self.per_layer_post_norm, block(x, per_layer))

    def _hyper(self, x: Tensor, *, positions: Tensor, bias: Tensor | None, ids: Tensor | None) -> Tensor:
        """Run each block behind its hyper-connection (transformers' DeepseekV4DecoderLayer), `x` the streams.

        The block reads the streams' `pre` mix through its norm; its output is spread back over
        the streams by `post` and added to the streams mixed by the doubly stochastic `comb`.
        """
        mixer, ffn = self.mixer, self.ffn
        blocks = (("mixer", None if mixer is None else (lambda y: mixer(y, positions=positions, bias=bias))),
                  ("ffn", None if ffn is None else (lambda y: _feed(ffn, y, ids))))
        for name, block in blocks:
            hc = getattr(self, f"{name}_hc")
            if block is None or hc is None:
                continue
            post, comb, collapsed = hc(x)
            x = hc.merge(x, block(_apply(getattr(self, f"{name}_norm"), collapsed)), post, comb)
        return x

    def _blocks(self, x: Tensor, *, positions: Tensor, bias: Tensor | None, memory: Tensor | None,
                ids: Tensor | None = None) -> Tensor:
        """Return `x` through the mixer, cross-attention and feed-forward blocks with their norms."""
        mixer, cross, ffn = self.mixer, self.cross_attention, self.ffn
        if mixer is None and cross is not None and memory is None:
            return x  # a cross-attention layer with no stream to attend to (transformers' text-only path)
        if self.wiring in ("parallel", "parallel_two_norms") and mixer is not None and ffn is not None:
            normed = _apply(self.mixer_norm, x)
            ffn_input = normed if self.ffn_norm is None else self.ffn_norm(x)
            return x + mixer(normed, positions=positions, bias=bias) + ffn(ffn_input)
        if mixer is not None:
            x = self._block("mixer", x, lambda y: mixer(y, positions=positions, bias=bias))
        if cross is not None:
            x = self._block("cross", x, lambda y: cross(y, positions=positions, memory=memory))
        if ffn is not None:  # a feed-forward that `reads_residual` (MoEBesideMLP) also gets the block's input
            x = self._block("ffn", x, (lambda y: ffn(y, x)) if getattr(ffn, "reads_residual", False)
                            else (lambda y: _feed(ffn, y, ids)))
        return x

    def _block(self, name: str, x: Tensor, block: Callable[[Tensor], Tensor]) -> Tensor:
        """Run one block with its norms: before it, after it (before or after the residual add)."""
        pre, post = getattr(self, f"{name}_norm"), getattr(self, f"{name}_post_norm")
        out = _apply(getattr(self, f"{name}_gate"), block(_apply(pre, x)))
        if post is None:
            return x + out
        return post(x + out) if self.wiring == "post_norm" else x + post(out)


def _apply(norm: nn.Module | None, x: Tensor) -> Tensor:
    return x if norm is None else norm(x)


def _feed(ffn: nn.Module, x: Tensor, ids: Tensor | None) -> Tensor:
    """Return the feed-forward's output for `x`, handing it the tokens' ids when it routes by them (a hash router)."""
    out: Tensor = ffn(x, ids=ids) if getattr(ffn, "by_ids", False) else ffn(x)
    return out


class Tower(nn.Module):
    """A stack of layers with its final norm and, for T5-style models, its position bias."""

    def __init__(self, layers: Sequence[nn.Module], norm: nn.Module,
                 position_bias: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = norm
        self.position_bias = position_bias

    def forward(self, x: Tensor, *, positions: Tensor, memory: Tensor | None = None) -> Tensor:
        """Run every layer on `x` and return the normalised output."""
        bias = None if self.position_bias is None else self.position_bias(positions, positions)
        for layer in self.layers:
            x = layer(x, positions=positions, bias=bias, memory=memory)
        return self.norm(x)


class MTPLayer(nn.Module):
    """A multi-token-prediction layer: embedding and hidden norms, their 2h→h projection, a layer, a norm.

    Each module is a slot built through its family (hpdsl/bound/slots.py `mtp_slots`; eh_proj the mtp_proj
    slot, whose layout splits it over tp and gathers its output: families/projection.hpf).
    """

    def __init__(self, *, enorm: nn.Module, hnorm: nn.Module, eh_proj: nn.Module, layer: nn.Module,
                 norm: nn.Module) -> None:
        super().__init__()
        self.enorm, self.hnorm, self.eh_proj = enorm, hnorm, eh_proj
        self.layer, self.norm = layer, norm

    def forward(self, hidden: Tensor, embedded: Tensor, *, positions: Tensor) -> Tensor:
        """Return the hidden state predicting one token further from `hidden` and the next embeddings."""
        return self.norm(self.mix(hidden, embedded, positions=positions))

    def mix(self, hidden: Tensor, embedded: Tensor, *, positions: Tensor) -> Tensor:
        """Return the layer's output before the final norm (what full recompute reruns: hpdsl/torch/parallelize.py)."""
        x = self.eh_proj(torch.cat([self.enorm(embedded), self.hnorm(hidden)], dim=-1))
        return self.layer(x, positions=positions)


class CausalLM(nn.Module):
    """Decoder-only language model: embedding, layers, final norm, head (tied: the embedding).

    The outer wiring's optional slots (hpdsl/bound/slots.py end_slots) sit where a
    token meets them: embed, project_in, the learned positions (row p + position_offset),
    embed_norm, the layers, the final norm (None: no_final_norm), project_out, the head. With
    per-layer inputs (Gemma 4's PLE) each layer also gets its own, made from the tokens' rows of
    per_layer_embed and the projection (per_layer_proj) of the embeddings (`per_layer_inputs`).
    """

    def __init__(self, *, embed: nn.Module, layers: Sequence[nn.Module], norm: nn.Module | None,
                 head: nn.Module | None, position_bias: nn.Module | None = None,
                 mtp: list[nn.Module] | None = None, cp_rank: int = 0,
                 positions: nn.Module | None = None, logit_softcap: float = 0.0,
                 project_in: nn.Module | None = None, project_out: nn.Module | None = None,
                 embed_norm: nn.Module | None = None, position_offset: int = 0,
                 per_layer: Mapping[str, nn.Module] | None = None, hc_head: nn.Module | None = None) -> None:
        super().__init__()
        self.logit_softcap = logit_softcap  # final_softcap (Gemma 2): every logit c·tanh(logit / c)
        self.embed = embed
        self.project_in = project_in  # embed_width → hidden (OPT-350m)
        self.positions = positions  # a learned absolute position table (GPT-2), added to the tokens
        self.position_offset = position_offset  # rows before position 0 (OPT: 2)
        self.embed_norm = embed_norm  # BLOOM's word_embeddings_layernorm
        self.layers = nn.ModuleList(layers)
        self.norm = norm
        self.project_out = project_out  # hidden → embed_width, before the head
        self.head = head
        self.position_bias = position_bias
        self.mtp = nn.ModuleList(mtp) if mtp else None
        self.cp_rank = cp_rank
        ends = dict(per_layer or {})
        self.per_layer_embed = ends.get("per_layer_embed")
        self.per_layer_proj = ends.get("per_layer_proj")
        self.per_layer_norm = ends.get("per_layer_norm")
        self.hc_head = hc_head  # DeepSeek-V4: the hc_mult residual streams collapse into one before the final norm

    def per_layer_inputs(self, ids: Tensor, x: Tensor) -> Tensor | None:
        """Return every layer's per-layer input [b, s, layers, width] for tokens `ids` embedded as `x`; None without.

        As transformers' Gemma4TextModel: the tokens' rows of the per-layer table (scaled
        by √width under embed_scale: the embedding family's) plus the norm of each layer's
        share of per_layer_proj(x) / √hidden, the sum times 1/√2.
        """
        table, proj = self.per_layer_embed, self.per_layer_proj
        if table is None or proj is None:
            return None
        rows = table(ids)
        rows = rows.reshape(*ids.shape, len(self.layers), -1)
        projected = (proj(x) * x.shape[-1] ** -0.5).reshape(rows.shape)
        return (_apply(self.per_layer_norm, projected) + rows) * 2.0 ** -0.5

    def embed_tokens(self, ids: Tensor, positions: Tensor) -> Tensor:
        """Return the first layer's input: the looked-up rows, projected, plus positions, normalised."""
        x = self.embed(ids)
        if self.project_in is not None:
            x = self.project_in(x)
        if self.positions is not None:
            x = x + self.positions(positions + self.position_offset)
        return x if self.embed_norm is None else self.embed_norm(x)

    def streams(self, x: Tensor) -> Tensor:
        """Return the first layer's residual streams: `x` copied hc_mult times with a hyper head, else `x`."""
        if self.hc_head is None:
            return x
        streams: int = getattr(self.hc_head, "streams")  # HyperHead's (hpdsl/torch/modules/hyper.py)
        return x.unsqueeze(2).expand(-1, -1, streams, -1).contiguous()

    def final(self, x: Tensor) -> Tensor:
        """Return the head's input: the last hidden states (streams collapsed) through the final norm and project_out."""
        x = _apply(self.hc_head, x)
        x = x if self.norm is None else self.norm(x)
        return x if self.project_out is None else self.project_out(x)

    def forward(self, input_ids: Tensor, memory: Tensor | None = None) -> Tensor:
        ids = input_ids if input_ids.ndim == 2 else input_ids[..., 0]
        seq = ids.shape[1]
        positions = self.cp_rank * seq + torch.arange(seq, device=ids.device)
        x = self.embed_tokens(ids, positions)
        inputs = self.per_layer_inputs(ids, x)
        x = self.streams(x)
        bias = None if self.position_bias is None else self.position_bias(positions, positions)
        for i, layer in enumerate(self.layers):
            per_layer = None if inputs is None else inputs[:, :, i]
            x = layer(x, positions=positions, bias=bias, memory=memory, ids=ids,
                      **({} if per_layer is None else {"per_layer": per_layer}))
        logits = output_logits(self.final(x), self.head, self.embed, softcap=self.logit_softcap)
        if input_ids.ndim == 2 or self.mtp is None:
            return logits
        every = [logits]
        for depth, mtp in enumerate(self.mtp, start=1):
            x = mtp(x, self.embed(input_ids[..., depth]), positions=positions)
            every.append(output_logits(x, self.head, self.embed, softcap=self.logit_softcap))
        return torch.cat(every, dim=1)


class Seq2SeqLM(nn.Module):
    """Encoder-decoder language model sharing one embedding between the towers."""

    def __init__(self, *, embed: nn.Module, encoder: Tower, decoder: Tower, head: nn.Module | None) -> None:
        super().__init__()
        self.embed, self.encoder, self.decoder, self.head = embed, encoder, decoder, head

    def forward(self, input_ids: Tensor, decoder_input_ids: Tensor) -> Tensor:
        """Return the decoder's logits [b, t, vocab]."""
        source = torch.arange(input_ids.shape[1], device=input_ids.device)
        target = torch.arange(decoder_input_ids.shape[1], device=input_ids.device)
        memory = self.encoder(self.embed(input_ids), positions=source)
        out = self.decoder(self.embed(decoder_input_ids), positions=target, memory=memory)
        return output_logits(out, self.head, self.embed)


def output_logits(x: Tensor, head: nn.Module | None, embed: nn.Module | None, *, softcap: float = 0.0) -> Tensor:
    """Return the logits of hidden states `x`: the head's, or a tied head's product with the embedding table.

    `softcap` c > 0 soft-caps them to c·tanh(logit / c) (final_softcap, Gemma 2).
    """
    logits = _logits(x, head, embed)
    return torch.tanh(logits / softcap) * softcap if softcap else logits


def _logits(x: Tensor, head: nn.Module | None, embed: nn.Module | None) -> Tensor:
    if head is not None:
        out: Tensor = head(x)
        return out
    if embed is None:
        raise BuildError("a tied head needs the embedding table (a pipeline chunk's copy)")
    weight = embed.get_parameter("weight")  # a tied head reads the embedding family's table
    if isinstance(weight, DTensor):
        # Split over the vocabulary (tp): every rank computes its own logits, a DTensor sharded on
        # the vocabulary like the untied head's; the hidden states' gradient is summed over tp.
        x = DTensor.from_local(x, weight.device_mesh, [Replicate()], run_check=False)
    return x @ weight.t()


__all__ = ["GATE_PATHS", "HYPER_PATHS", "NORM_PATHS", "CausalLM", "DecoderLayer", "MTPLayer", "RelativePositionBias", "Seq2SeqLM", "Tower", "output_logits"]
