"""`make demo`: a new user sees an operator put to sleep and woken on a real local cluster."""
