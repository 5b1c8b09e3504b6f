"""hmc/_hmc.pyi describes what the extension has: every exported name, and every public
method and property of each class."""

import ast
import os

import hmc
import hmc._hmc

STUB = os.path.join(os.path.dirname(hmc.__file__), "_hmc.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def test_stub_names_every_export():
    tree = stub_tree()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    assert set(hmc.__all__) <= names, set(hmc.__all__) - names


def test_stub_classes_match_the_extension():
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef) or not hasattr(hmc._hmc, node.name):
            continue
        cls = getattr(hmc._hmc, node.name)
        if issubclass(cls, BaseException):
            continue
        stubbed = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} - {"__init__"}
        actual = {n for n in dir(cls) if not n.startswith("_")} | (
            {"__enter__", "__exit__", "__await__", "__dlpack__", "__dlpack_device__"}
            & set(vars(cls)))
        assert stubbed == actual, (node.name, stubbed ^ actual)
