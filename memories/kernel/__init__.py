"""The kernel: the machinery written once, knowing no memory class and no store.

Its modules, and what each is for, are drawn in ``docs/architecture.md`` ("The floors").
"""
