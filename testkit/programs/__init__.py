"""Programs the kit and the Makefile run as processes of their own; nothing imports them."""
