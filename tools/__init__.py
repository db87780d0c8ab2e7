"""Development tools that are neither images nor the local cluster: run from the checkout."""
