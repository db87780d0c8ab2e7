"""Pure logic shared by the webhook and the controller: no I/O, no clock, no logging."""
