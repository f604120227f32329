"""Whether a strategy can run a model: the rules, and every reason it cannot (coded problems).

Above hpdsl/cost/formulas/, below price and sweep.
"""
