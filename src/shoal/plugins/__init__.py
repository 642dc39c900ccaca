"""shoal.plugins: one module per plugin; each exposes `open(session, arguments)`."""
