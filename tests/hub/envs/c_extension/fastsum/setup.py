"""A C extension that needs Python's headers (Python.h) to build."""

from setuptools import Extension, setup

setup(name="fastsum", version="0.1", ext_modules=[Extension("fastsum", ["fastsum.c"])])
