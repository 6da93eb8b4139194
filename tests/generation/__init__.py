"""Tests of generation/, in files named after its modules where one module is tested."""
