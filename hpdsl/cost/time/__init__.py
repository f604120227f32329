"""The step-time side of the cost model: the machine a strategy runs on, as data (devices.py)."""
