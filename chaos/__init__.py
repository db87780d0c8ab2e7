"""Fault scenarios: zeroscaler's promises checked while its control plane breaks (`make chaos`)."""
