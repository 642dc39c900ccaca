"""shoal.conformance: load KAI's transcribed scheduling scenarios, run them on the core, check them."""
