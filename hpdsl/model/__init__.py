"""The model layer: what every stage agrees on, declared once (no torch, no lark).

Fields, slots, op meanings, axis sizes and the inputs family conditions are
evaluated on live here; the checker, the IR, the estimator and the torch
backend read them and never restate them.
"""
