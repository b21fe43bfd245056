"""Exits while it is imported (tests/tools/python_cli_test.cpp): the worker dies loading it."""
import os

os._exit(3)
