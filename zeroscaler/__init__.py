"""zeroscaler: scale idle Kubernetes operators to zero and wake them on the first change."""
