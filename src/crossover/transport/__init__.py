"""Bytes and timestamps: the shared HTTP session, the SSE parser, timeouts."""
