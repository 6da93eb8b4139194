"""Tests of builder/release/validate/, in files named after its modules where one module is tested."""
