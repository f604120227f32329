"""The bound model: a compiled model and its profile into per-layer configs and slots (no torch, no lark).

`bind` (bind.py) turns a ModelIR and its ProfileIR into the bound cost IR: a base
config, layer groups and the fields each kind assigns. `layer_slots` (slots.py)
turns a bound layer into its modules: which slot each fills, the family bound
to it, the config it is built from. `layer_problems` (shape.py) says why a
layer cannot be built. The checker, the estimator and the torch backend all
read these, so what the checker accepts is what the backend builds and the
estimator prices.
"""
