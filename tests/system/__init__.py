"""Tests against the real local control plane: the API server calls the webhook, the controller
runs as a process. Run under a loopback-only network namespace (`make test`)."""
