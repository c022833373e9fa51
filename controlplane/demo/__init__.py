"""Demo mode: the simulated clouds' nodes as local processes running emulated engines, a
demo policy, and bursty traffic sent to the engines as real requests, with timings
compressed so the whole loop moves in seconds. Nothing here is special-cased in the loop:
the demo only chooses the providers, the health probe, the metrics source and the tuning,
and runs its parts beside the daemon."""

# Under the state directory: the demo's own (database, Prometheus), and in it the local
# nodes, one folder per instance id (``providers.sim.local``: its engine's pid file too).
STATE_SUBDIR = "demo"
NODES_SUBDIR = "nodes"
