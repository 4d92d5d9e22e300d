"""Post-export quantization of ONNX graphs.

:func:`quantize_int8` applies onnxruntime's *dynamic* quantization: weights of MatMul / Gemm /
Gather (embedding) nodes are stored as int8 with one scale per tensor, activations are
quantized on the fly at run time. No calibration data is needed, files shrink about 4x and
CPU inference gets faster; accuracy on the metric tasks stays close to fp32 (the parity
tests in ``tests/test_models_export.py`` bound the drift on the tiny models).

Per-channel scales are off by default: with dynamic quantization on CPU they rarely help
transformer encoders and they make some graphs slower; ``per_channel=True`` is available for
a model that loses too much accuracy.
"""
from __future__ import annotations

from pathlib import Path

# Graphs above this size are saved with their weights in a side file (ONNX protobufs are
# limited to 2 GiB).
_EXTERNAL_DATA_BYTES = 1_800_000_000


def external_data_files(onnx_path: str | Path) -> list[Path]:
    """The side files holding ``onnx_path``'s weights, if it stores any outside the graph."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    onnx_path = Path(onnx_path)
    model = onnx.load(str(onnx_path), load_external_data=False)
    found: list[Path] = []
    for init in model.graph.initializer:
        if uses_external_data(init):
            for entry in init.external_data:
                if entry.key == "location":
                    p = onnx_path.parent / entry.value
                    if p not in found:
                        found.append(p)
    return found


def quantize_int8(src: str | Path, dst: str | Path, *, per_channel: bool = False) -> Path:
    """Write an int8 dynamically quantized copy of the ONNX graph ``src`` to ``dst``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    total = src.stat().st_size + sum(p.stat().st_size for p in external_data_files(src))
    quantize_dynamic(
        model_input=str(src),
        model_output=str(dst),
        per_channel=per_channel,
        reduce_range=False,
        weight_type=QuantType.QInt8,
        use_external_data_format=total // 4 > _EXTERNAL_DATA_BYTES,
    )
    return dst


def check_loads(onnx_path: str | Path) -> tuple[list[str], list[str]]:
    """Open ``onnx_path`` in onnxruntime (1 thread); return its input and output names."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
    return [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]
