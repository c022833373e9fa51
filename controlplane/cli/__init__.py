"""The ``gpucap`` console script: ``gpucap daemon`` runs the daemon; every other command is
the admin CLI (talking to a running daemon over gRPC), or an offline tool (policy validate,
simulate, account check)."""
