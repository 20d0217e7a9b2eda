# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The public surface: the stubs match the module, everything has a
docstring with a signature, and constants have the library's values."""

import ast
import inspect
import os

import devmemtcp as dm
from devmemtcp import _devmemtcp

STUB = os.path.join(os.path.dirname(dm.__file__), "_devmemtcp.pyi")


def stub_names():
    tree = ast.parse(open(STUB).read())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names.add(node.name)
            members[node.name] = {n.name for n in node.body
                                  if isinstance(n, (ast.FunctionDef, ast.AnnAssign))
                                  and not getattr(n, "name", "_").startswith("_")} | {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    return names, members


def test_stubs_match_the_module():
    names, members = stub_names()
    public = {n for n in dir(_devmemtcp) if not n.startswith("_")}
    assert names == public
    assert set(dm.__all__) == public
    closable = {"close", "closed"}
    for cls, m in members.items():
        if cls in ("Error", "TimeoutError"):
            continue
        obj = getattr(dm, cls)
        real = {n for n in dir(obj) if not n.startswith("_")} - set(dir(tuple))
        if cls in ("Fragment", "Queue", "TxDone"):
            real = set(obj._fields) if hasattr(obj, "_fields") else set(
                obj.__match_args__)
        if cls in ("Context", "Buffer", "Binding", "Nic", "Gpu", "Rx", "Tx", "Zcrx"):
            m = m | closable
        assert m == real - {"n_fields", "n_sequence_fields", "n_unnamed_fields"}, cls


def test_docstrings_and_signatures():
    for name in dm.__all__:
        obj = getattr(dm, name)
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        assert obj.__doc__, name
        for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
            if attr.startswith("_") and attr not in ("__dlpack__", "__dlpack_device__"):
                continue
            if callable(member) or isinstance(member, (classmethod, staticmethod)):
                doc = getattr(obj, attr).__doc__
                assert doc and len(doc) > 20, (name, attr)
    assert str(inspect.signature(dm.Rx.recv)) == "(self, /, max_bytes=None, max_frags=None, timeout=None)"
    assert str(inspect.signature(dm.Fragments.gather_into)) == "(self, /, dst, stream=None)"
    assert "Receive the next bytes of the stream" in dm.Rx.recv.__doc__


def test_constants():
    assert (dm.PROVIDER_UDMABUF, dm.PROVIDER_IMPORT, dm.PROVIDER_CUDA, dm.PROVIDER_DRM) == (1, 2, 3, 4)
    assert (dm.FRAG_LINEAR, dm.FRAG_FOREIGN) == (1, 2)
    assert (dm.kDLCPU, dm.kDLCUDA) == (1, 2)
    assert (dm.LOG_OFF, dm.LOG_NONE, dm.LOG_ERR, dm.LOG_WARN, dm.LOG_INFO, dm.LOG_DEBUG) == (-1, 0, 3, 4, 6, 7)
    assert dm.version() == dm.__version__
    assert dm.RELEASE_ANY_THREAD is True
