"""Host <-> tensor copies for singa 3.0.0.dev1, whose SWIG binding lacks the numpy typemaps.

Python 3.6 code, standard library plus numpy; see workers/adapters/singa/adapter.py and
docs/frameworks/singa.md for why each of these exists and the errors they mend.
"""

import ctypes


# -- host <-> device copies through the binding --------------------------------------------


class _SwigType(ctypes.Structure):
    """SWIG's swig_type_info; only `name` is read when a pointer argument is type-checked."""
    _fields_ = [("name", ctypes.c_char_p), ("str", ctypes.c_char_p), ("dcast", ctypes.c_void_p),
                ("cast", ctypes.c_void_p), ("clientdata", ctypes.c_void_p), ("owndata", ctypes.c_int)]


class _SwigObject(ctypes.Structure):
    """SWIG's SwigPyObject (pyrun.swg): the Python object that carries a C++ pointer."""
    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p),
                ("ptr", ctypes.c_void_p), ("ty", ctypes.c_void_p), ("own", ctypes.c_int),
                ("next", ctypes.c_void_p)]


class HostIO(object):
    """Copies between numpy arrays and singa tensors with the binding's own C++ methods.

    The wheel binds ``CopyFloatDataFromHostPtr(const float *src, size_t num)`` and
    ``GetFloatValue(float *out, size_t num)`` without the numpy typemap its Python layer expects.
    SWIG accepts any of its pointer objects whose type is named ``_p_float``: a pointer object of
    ours (borrowed from a throw-away ``Shape``) is pointed at the array for the duration of the
    call and restored before it can be freed.
    """

    wrap = None  # singa_wrap, set once singa is imported (HostIO.wrap = singa_wrap)
    TYPES = {"float32": _SwigType(b"_p_float", b"float *", None, None, None, 0),
             "int32": _SwigType(b"_p_int", b"int *", None, None, None, 0)}

    @classmethod
    def _call(cls, method, array):
        carrier = cls.wrap.Shape()
        raw = _SwigObject.from_address(id(carrier.this))
        saved = (raw.ptr, raw.ty, raw.own)
        raw.ptr, raw.ty, raw.own = array.ctypes.data, ctypes.addressof(cls.TYPES[array.dtype.name]), 0
        try:
            return method(carrier.this, array.size)
        finally:
            raw.ptr, raw.ty, raw.own = saved

    @classmethod
    def put(cls, tensor, array):
        """Copy a C-contiguous float32 or int32 array of the tensor's size into it."""
        if array.size != tensor.size() or not array.flags["C_CONTIGUOUS"]:
            raise ValueError("cannot copy a {} array into a tensor of shape {}".format(
                array.shape, tensor.shape))
        if array.dtype.name == "float32":
            cls._call(tensor.data.CopyFloatDataFromHostPtr, array)
        elif array.dtype.name == "int32":
            cls._call(tensor.data.CopyIntDataFromHostPtr, array)
        else:
            raise TypeError("no copy for {} arrays".format(array.dtype))

    @classmethod
    def get(cls, tensor):
        """A float32 numpy copy of a float tensor."""
        import numpy as np

        out = np.empty(tuple(tensor.shape), dtype=np.float32)
        cls._call(tensor.data.GetFloatValue, out)
        return out

    @classmethod
    def unpack(cls, vector, count):
        """Move the tensors out of a returned ``std::vector<singa::Tensor> *`` (no wrapper exists).

        The element size comes from the vector's own begin/end pointers; each element's bytes are
        swapped with a fresh empty Tensor's, so the new Python-owned tensors hold the results and
        the (unfreeable) vector is left holding empty tensors.
        """
        wrap, pointer = cls.wrap, ctypes.sizeof(ctypes.c_void_p)
        address = _SwigObject.from_address(id(vector)).ptr
        begin = ctypes.c_void_p.from_address(address).value
        end = ctypes.c_void_p.from_address(address + pointer).value
        if count == 0 or (end - begin) % count:
            raise RuntimeError("unexpected std::vector<Tensor> layout ({} bytes for {} tensors)".format(
                end - begin, count))
        size = (end - begin) // count
        # SWIG would report the vector as a leak when its proxy dies; the leak is known (the vector
        # and `count` emptied tensors, once per kernel call: once per graph buffering) and
        # documented, so the proxy is told it owns nothing.
        _SwigObject.from_address(id(vector)).own = 0
        scratch = ctypes.create_string_buffer(size)
        tensors = []
        for i in range(count):
            fresh = wrap.Tensor()
            own = _SwigObject.from_address(id(fresh.this)).ptr
            ctypes.memmove(scratch, own, size)
            ctypes.memmove(own, begin + i * size, size)
            ctypes.memmove(begin + i * size, scratch, size)
            tensors.append(fresh)
        return tensors
