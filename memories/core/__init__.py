"""The contract every memory shares: the base classes, composition, building from configuration.

Its modules, and what each is for, are drawn in ``docs/architecture.md`` ("The floors").
"""
