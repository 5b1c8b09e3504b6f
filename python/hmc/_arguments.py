"""One-line TypeErrors for arguments of the wrong type.

pybind11 answers a call whose arguments do not convert with every overload's signature and a
repr of every argument. The methods of the extension's classes are wrapped so that such a call
raises TypeError naming the method and the first argument that does not fit instead:
"Peer.send(): argument 'tag' must be int, not str". Other TypeErrors pass unchanged."""

import functools
import re

_PYBIND = ("incompatible function arguments", "incompatible constructor arguments")
_SIMPLE = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
           "bytes": (bytes,)}


def _split(params):
    """Top-level comma-separated parts of a signature (brackets nest)."""
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch in "[(" and 1 or ch in "])" and -1 or 0
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _parameters(message):
    """[(name, type, has_default)] of the first overload in pybind11's message."""
    m = re.search(r"\n\s+1\. [^(]*\((.*)\)", message)
    if not m:
        return None
    out = []
    for p in _split(m.group(1)):
        name, _, rest = p.partition(":")
        typ, _, default = rest.partition("=")
        out.append((name.strip(), typ.strip(), bool(default.strip())))
    return out


def _fits(value, typ, module):
    if typ.startswith("Optional[") and typ.endswith("]"):
        return value is None or _fits(value, typ[9:-1], module)
    if typ in _SIMPLE:
        if typ in ("int", "float") and isinstance(value, bool):
            return typ == "int"
        return isinstance(value, _SIMPLE[typ])
    if typ.startswith("hmc._hmc."):
        cls = getattr(module, typ[len("hmc._hmc."):], None)
        return cls is None or isinstance(value, cls)
    if typ.startswith(("List[", "Sequence[")):
        return isinstance(value, (list, tuple))
    return True  # object, handle, buffers: the function itself checks them


def _explain(qualname, message, args, kwargs, module, bound_self):
    params = _parameters(message)
    if params is None:
        return f"{qualname}(): the arguments do not fit"
    if bound_self and params and params[0][0] == "self":
        params = params[1:]
    names = [p[0] for p in params]
    sig = ", ".join(n + ("=..." if d else "") for n, _, d in params)
    if len(args) > len(params):
        return f"{qualname}(): takes at most {len(params)} arguments ({sig}), got {len(args)}"
    for k in kwargs:
        if k not in names:
            return f"{qualname}(): no argument '{k}' (it takes {sig})"
    given = dict(zip(names, args))
    given.update(kwargs)
    for name, typ, has_default in params:
        if name not in given:
            if not has_default:
                return f"{qualname}(): argument '{name}' is missing (it takes {sig})"
            continue
        if not _fits(given[name], typ, module):
            return (f"{qualname}(): argument '{name}' must be {typ.replace('hmc._hmc.', 'hmc.')}, "
                    f"not {type(given[name]).__name__}")
    return f"{qualname}(): the arguments do not fit ({sig})"


def _wrap(cls, name, fn, module):
    qualname = f"{cls.__name__}.{name}" if name != "__init__" else cls.__name__

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except TypeError as e:
            text = str(e)
            if not any(p in text for p in _PYBIND):
                raise
            raise TypeError(_explain(qualname, text, args, kwargs, module, True)) from None

    return call


def install(module):
    """Wraps every method of the extension's classes (module: hmc._hmc)."""
    for cls in vars(module).values():
        if not isinstance(cls, type) or issubclass(cls, BaseException):
            continue
        for name, fn in list(vars(cls).items()):
            if type(fn).__name__ != "instancemethod":
                continue
            if name.startswith("__") and name not in ("__init__",):
                continue
            setattr(cls, name, _wrap(cls, name, fn, module))
