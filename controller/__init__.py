"""The scaler: sleeps idle operators and wakes them on the first change to what they watch."""
