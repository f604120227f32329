"""The search's machinery: the space of candidates, the bounded sweep that prunes it, the ranking.

Above hpdsl/cost/price/, below the top (hpdsl/cost/search.py).
"""
