"""Tests of generation/backends/, in files named after its modules where one module is tested."""
