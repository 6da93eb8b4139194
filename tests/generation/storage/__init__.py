"""Tests of generation/storage/, in files named after its modules where one module is tested."""
