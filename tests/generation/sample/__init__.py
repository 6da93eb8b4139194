"""Tests of generation/sample/, in files named after its modules where one module is tested."""
