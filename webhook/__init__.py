"""The zeroscaler mutating admission webhook."""
