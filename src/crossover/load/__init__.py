"""When to send: closed loop (C workers), open loop (Poisson, absolute schedule)."""
