"""zeroscaler's container image, built from pinned Debian packages and locked wheels."""
