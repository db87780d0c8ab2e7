"""The test kit: what the unit, chart and system tests, the benchmarks, the fault scenarios and the
demo share. No tests of its own, and it imports none of them."""
