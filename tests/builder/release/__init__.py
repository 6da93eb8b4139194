"""Tests of builder/release/, in files named after its modules where one module is tested."""
