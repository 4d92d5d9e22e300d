"""`fscore-lite models export`: per-channel int8 by default, `--per-tensor` to opt out; the
choice is recorded in the manifest entry's extra (``quantization_scheme``)."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fscore_lite.commands.models import app
from fscore_lite.manifest import Bundle

pytestmark = pytest.mark.export


def _scale_sizes(path) -> set[int]:
    import numpy as np
    import onnx

    graph = onnx.load(str(path)).graph
    return {int(np.prod(i.dims)) for i in graph.initializer if i.name.endswith("_scale")}


def test_export_cli_per_channel_default_and_per_tensor_flag(tiny_checkpoints, tmp_path):
    runner = CliRunner()
    out = tmp_path / "bundle"
    for name, flags in (("cli-qa-pc", []), ("cli-qa-pt", ["--per-tensor"])):
        result = runner.invoke(app, ["export", "qa", str(tiny_checkpoints["qa"]), "-o", str(out), "--name", name,
                                     "--threads", "1", *flags])
        assert result.exit_code == 0, result.output
    bundle = Bundle(out)
    pc, pt = bundle.get("cli-qa-pc"), bundle.get("cli-qa-pt")
    assert pc.extra["quantization_scheme"] == "per-channel" and pt.extra["quantization_scheme"] == "per-tensor"
    assert max(_scale_sizes(bundle.verified_path(pc, "weights"))) > 1
    assert _scale_sizes(bundle.verified_path(pt, "weights")) == {1}
