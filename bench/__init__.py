"""The benchmarks behind the README's figures, each against a baseline measured in the same run."""
