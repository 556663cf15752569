"""Tensors across the boundary (no GPU): how launch reads DLPack and __cuda_array_interface__ objects."""

import numpy as np
import pytest

import coda

convert = coda._coda._convert_bindings


def host(bindings):
    return convert(bindings, device_only=False)


class FakeCudaArray:
    """Only __cuda_array_interface__ (version 3), as cupy or numba expose it; the pointer is never dereferenced."""

    def __init__(self, shape, typestr, strides=None, pointer=0x7F0000000000):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "data": (pointer, False), "strides": strides, "version": 3}


def test_layouts_from_strides():
    a = np.zeros((6, 4), np.float32)
    w = np.zeros((8, 4), np.float32)
    padded = np.zeros((6, 16), np.float32)[:, :10]
    out = host({"A": a, "B": w.T, "tile": padded, "vec": np.zeros(5, np.int32), "s": 0.25, "i": 3})
    assert out["A"] == "f32 [6 x 4] strides [4, 1]"  # row-major
    assert out["B"] == "f32 [4 x 8] strides [1, 4]"  # w.T: column-major, ld = K
    assert out["tile"] == "f32 [6 x 10] strides [16, 1]"  # a view keeps its row pitch
    assert out["vec"] == "i32 shape [5] strides [1]"
    assert out["s"] == 0.25 and out["i"] == 3.0


def test_extent_one_dimensions_get_the_stride_their_layout_needs():
    out = host({"row": np.zeros((1, 8), np.float32), "col": np.zeros((8, 3), np.float32)[:, :1]})
    assert out["row"] == "f32 [1 x 8] strides [8, 1]"
    assert out["col"] == "f32 [8 x 1] strides [3, 1]"


def test_torch_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    w = torch.zeros(16, 8, dtype=torch.bfloat16)
    out = host({"A": torch.zeros(4, 8, dtype=torch.float16), "B": w.t(), "x": torch.zeros(4, 16)[:, 2:10],
                "pos": torch.zeros(4, dtype=torch.int32)})
    assert out["A"] == "f16 [4 x 8] strides [8, 1]"
    assert out["B"] == "bf16 [8 x 16] strides [1, 8]"
    assert out["x"] == "f32 [4 x 8] strides [16, 1]"
    assert out["pos"] == "i32 shape [4] strides [1]"
    with pytest.raises(coda.Error, match="'g'.*CUDA tensor"):
        convert({"g": torch.zeros(4)})


def test_cuda_array_interface():
    out = host({"m": FakeCudaArray((4, 6), "<f2", strides=(2, 16)), "v": FakeCudaArray((7,), "<i4"),
                "r": FakeCudaArray((3, 5), "<f4")})
    assert out["m"] == "f16 [4 x 6] strides [1, 8]"
    assert out["v"] == "i32 shape [7] strides [1]"
    assert out["r"] == "f32 [3 x 5] strides [5, 1]"
    assert convert({"m": FakeCudaArray((4, 6), "<f2")}) == {"m": "f16 [4 x 6] strides [6, 1]"}
    with pytest.raises(coda.Error, match="'m'.*typestr '<f8'"):
        convert({"m": FakeCudaArray((4, 6), "<f8")})
    with pytest.raises(coda.Error, match="'m'.*whole elements"):
        convert({"m": FakeCudaArray((4, 6), "<f4", strides=(26, 2))})


def test_conversion_errors_name_the_binding():
    cases = [
        ({"cpu": np.zeros((2, 2), np.float32)}, True, r"'cpu'.*expected a CUDA tensor"),
        ({"t3": np.zeros((2, 2, 2), np.float32)}, False, r"'t3'.*1-D \(vector\) and 2-D \(matrix\).*3 dimensions"),
        ({"f64": np.zeros((2, 2))}, False, r"'f64'.*float64 is not a coda dtype"),
        ({"u8": np.zeros(3, np.uint8)}, False, r"'u8'.*uint8"),
        ({"strided": np.zeros((4, 4), np.float32)[::2, ::2]}, False, r"'strided'.*stride 1 in one dimension"),
        ({"s": "text"}, False, r"'s'.*expected a CUDA tensor.*or a float, got str"),
        ({"b": True}, False, r"'b'.*got bool"),
    ]
    for bindings, device_only, message in cases:
        with pytest.raises(coda.Error, match=message):
            convert(bindings, device_only=device_only)
    with pytest.raises(TypeError, match="dict"):
        convert([("A", 1.0)])
    with pytest.raises(TypeError, match="str"):
        convert({1: 1.0})
