"""Certificate authority and serving certificates for the webhook (and the local control plane)."""
