"""Pure frame -> frame steps, each named after what it produces."""
