"""zeroscaler's tests: pure unit tests, system tests on a real control plane, and their support."""
