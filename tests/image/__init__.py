"""Tests of the OCI image built by scripts/build-image."""
