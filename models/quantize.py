"""Post-export quantization of ONNX graphs.

:func:`quantize_int8` applies onnxruntime's *dynamic* quantization: weights of MatMul / Gemm /
Gather (embedding) nodes are stored as int8, activations are quantized on the fly at run
time. No calibration data is needed, files shrink about 4x and CPU inference gets faster;
accuracy on the metric tasks stays close to fp32 (the parity tests in
``tests/test_models_export.py`` bound the drift on the tiny models).

Per-channel weight scales (one scale per output column) are the default: per-tensor int8 of
all-MiniLM-L6-v2 kept a cosine of only 0.937 to the fp32 embeddings, per-channel 0.994
(issue 10). ``per_channel=False`` (``fscore-lite models export --per-tensor``)
gives the older one-scale-per-tensor graphs.

Shared weights: the quantizer only quantizes a MatMul whose weight input *is* an
initializer. Exporters feed weights shared between layers (ALBERT's one layer, used 24 times;
tied embeddings) through ``Identity`` nodes, so before quantizing, :func:`fold_identities`
points every consumer of an ``Identity``-of-initializer at the initializer itself (the graph
computes exactly the same). Each shared weight is then quantized once and reused by every
MatMul that reads it: for ALBERT all weight MatMuls run in int8 instead of 8 of 146.
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


def fold_identities(model) -> int:
    """Rewire consumers of ``Identity(initializer)`` to read the initializer; returns how many.

    Works in place on an ``onnx.ModelProto`` (main graph). An Identity whose output is a graph
    output is kept (its name is part of the interface); the others are removed.
    """
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    outputs = {o.name for o in graph.output}
    alias: dict[str, str] = {}
    keep = []
    for node in graph.node:
        if (node.op_type == "Identity" and len(node.input) == 1 and node.output[0] not in outputs
                and (node.input[0] in inits or node.input[0] in alias)):
            alias[node.output[0]] = alias.get(node.input[0], node.input[0])
        else:
            keep.append(node)
    if not alias:
        return 0

    def rewire(nodes):
        for node in nodes:
            for i, name in enumerate(node.input):
                if name in alias:
                    node.input[i] = alias[name]
            for attr in node.attribute:  # subgraphs (If/Loop bodies) may read outer names
                for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    rewire(g.node)

    rewire(keep)
    del graph.node[:]
    graph.node.extend(keep)
    return len(alias)


def quantize_int8(src: str | Path, dst: str | Path, *, per_channel: bool = True) -> Path:
    """Write an int8 dynamically quantized copy of the ONNX graph ``src`` to ``dst``.

    Shared weights reached through ``Identity`` nodes are folded first (:func:`fold_identities`),
    so every MatMul with a constant weight is quantized.
    """
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    total = src.stat().st_size + sum(p.stat().st_size for p in external_data_files(src))
    big = total > _EXTERNAL_DATA_BYTES
    with tempfile.TemporaryDirectory(prefix=".fold-", dir=dst.parent) as tmp:
        model = onnx.load(str(src), load_external_data=True)
        if fold_identities(model):
            folded = Path(tmp) / src.name
            onnx.save(model, str(folded), save_as_external_data=big, all_tensors_to_one_file=True,
                      location=folded.name + "_data")
            src = folded
        del model
        quantize_dynamic(
            model_input=str(src),
            model_output=str(dst),
            per_channel=per_channel,
            reduce_range=False,
            weight_type=QuantType.QInt8,
            use_external_data_format=total // 4 > _EXTERNAL_DATA_BYTES,
        )
    return dst


def count_matmuls(onnx_path: str | Path) -> dict:
    """MatMuls of a graph: ``int8`` (quantized ones), ``fp32_weight`` (float MatMuls reading an
    initializer: missed by quantization) and ``fp32_activation`` (products of two activations,
    e.g. attention scores, which dynamic quantization leaves in fp32)."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    for node in graph.node:  # an Identity of a weight is a weight (what fold_identities removes)
        if node.op_type == "Identity" and node.input and node.input[0] in inits:
            inits.add(node.output[0])
    out = {"int8": 0, "fp32_weight": 0, "fp32_activation": 0}
    for node in graph.node:
        if node.op_type in ("MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul", "MatMulIntegerToFloat"):
            out["int8"] += 1
        elif node.op_type == "MatMul":
            out["fp32_weight" if any(i in inits for i in node.input) else "fp32_activation"] += 1
    return out


def check_loads(onnx_path: str | Path) -> tuple[list[str], list[str]]:
    """Open ``onnx_path`` in onnxruntime (1 thread); return its input and output names."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
    return [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]
