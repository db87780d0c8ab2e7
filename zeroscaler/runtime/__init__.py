"""What every zeroscaler process has: its log lines, the metrics it carries besides its own, and
how it is told to stop."""
