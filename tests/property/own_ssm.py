"""An author's own state-space family bound to the ssm slot of a two-layer model: the cost-term property tests' source."""

from __future__ import annotations

OPS = "attMM 4  attBMM 0  ffMM 3  softmax 0  dropout 0  normOp 2  gather 4  headCast 0  ffAct 1  linrec 0"
"""The op counts of the model's one kind: a mixer with no score work."""


def own_ssm_source(placement: str, cost: str, hidden: int, state: int, expand: int, ssm_flags: str = "") -> str:
    """Return family own_ssm (its projections placed `placement`, its `cost { }` lines `cost`) and model m using it."""
    return f'''
family own_ssm {{
  factory "acme.ssm:Own"
  variant plain "acme.ssm:Own" default params(w_in, w_out)
  layout {{
    w_in.weight  (ssm_expand * hidden, hidden) {placement[0]}
    w_out.weight (hidden, ssm_expand * hidden) {placement[1]}
  }}
  cost {{
{cost}
  }}
}}
profile own {{
  kind layer {{ attention ssm  slots {{ ssm own_ssm }}  ops {{ {OPS} }} }}
}}
model m : own {{
  hidden {hidden}  layers 2  heads 4  vocab 64  ffn_width 32
  ssm {{ ssm_state {state}  ssm_conv 4  ssm_expand {expand}{ssm_flags} }}
  stack [layer * 2]
}}
'''
