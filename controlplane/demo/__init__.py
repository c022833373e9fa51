"""Demo mode: simulated clouds, a demo policy and generated bursty traffic, with timings
compressed so the whole loop moves in seconds. Nothing here is special-cased in the loop:
the demo only chooses the providers, the metrics source and the tuning."""
