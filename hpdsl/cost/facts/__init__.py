"""The cost model's facts: what a bound model, a profile, a device and a strategy state, before any formula.

The bottom layer of hpdsl/cost/: it imports nothing above it (formulas,
feasibility, price, sweep).
"""
