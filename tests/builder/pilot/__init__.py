"""Tests of builder/pilot/, in files named after its modules where one module is tested."""
