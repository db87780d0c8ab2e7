"""What the system tests, the fault scenarios and the benchmarks share: no tests of their own."""
