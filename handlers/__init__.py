"""State handlers: the few pipeline steps that keep per-key state (sessions, carts, ...)."""
