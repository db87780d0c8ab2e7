"""A real local Kubernetes control plane on loopback, built from pinned Go modules."""
