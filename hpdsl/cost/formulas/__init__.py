"""The pricing formulas: bytes, FLOPs, traffic and time of a column, written once for arrays and floats.

Above hpdsl/cost/facts/, below feasibility, price and sweep.
"""
