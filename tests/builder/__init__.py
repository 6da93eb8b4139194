"""Tests of builder/, in files named after its modules where one module is tested."""
