"""The node lifecycle as pure transitions: (what the store knows of a node or replica, what
the cloud reports, now) -> what to do. No I/O and no clock reads here; the reconciler
(``controlplane/loop/reconcile.py``) observes the cloud, calls these, and applies the result.

- ``node``: one node's step (create, wait, move on, fail, terminate);
- ``gang``: the state of a replica from the states of its nodes (one failed node fails all);
- ``drain``: the one drain transition (scale-down, gang failure and on-call drains alike);
- ``blocking``: a typed provider error -> retry in place, or fail and block what for how long.
"""
