"""What many test files share and none owns: helpers live here (or in conftest.py), never in a test file,
so that a test file imports no other test file."""
