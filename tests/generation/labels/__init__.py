"""Tests of generation/labels/, in files named after its modules where one module is tested."""
