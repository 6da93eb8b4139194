"""Tests of generation/judging/, in files named after its modules where one module is tested."""
