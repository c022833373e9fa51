"""The gRPC API (``gpucap.v1.ControlPlane``): the server over the application service, the
proto <-> view conversions, and the client helpers the admin CLI uses."""
