"""The daemon's garbage-collector thresholds.

Every tick of the control loop allocates hundreds of thousands of short-lived container
objects (ORM rows, snapshots, plans). With CPython's defaults (700, 10, 10) the collector
runs thousands of young collections per tick and a full collection, which walks every tracked
object of the process, every few hundred of them. Reference counting frees nearly all of
those objects anyway; the collector is only needed for cycles. Raising the young threshold
keeps that safety at a fraction of the cost: at 10,000 models and 50,000 nodes on PostgreSQL
the loop's own CPU fell from 2.09-2.38 to 1.34-1.66 CPU-s per second of wall time
(bench/loop_scale.py, two runs each, interleaved; docs/benchmarks.md).
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 100)  # young objects; young runs per middle; middle per full


def tune() -> None:
    """Set the process's thresholds (the daemon at start; the loop benchmark likewise)."""
    gc.set_threshold(*THRESHOLDS)
