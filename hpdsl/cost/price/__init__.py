"""Prices of strategies: a model prepared once, a grid priced as arrays, one strategy through its compiled plan.

Above hpdsl/cost/feasibility/, below sweep and the top (estimate, search, diff).
"""
