"""Trace-driven simulator of ``gpucap simulate``: replays request traces against a fleet
under gpucap's autoscaler, the peer baselines and a clairvoyant oracle, with the same
provisioning, cold starts and metrics rules for all of them.

Modules: ``traces``/``servegen`` (readers), ``setup`` (fleet + trace -> engine inputs),
``engine`` (the discrete-event replay), ``metrics`` (scrape samples), ``capacity`` (the seam
to whatever supplies nodes), ``oracle``, ``runner`` (side by side, knob sweeps), ``report``
(HTML + PNG plots)."""
