"""Tests of builder/release/publish/, in files named after its modules where one module is tested."""
