"""`fscore-lite --help` and `models list` load no model code (numpy, onnxruntime, llama.cpp, ...):
what keeps the stand-alone binary's start-up short (docs/DIST.md)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "onnxruntime", "llama_cpp", "tokenizers", "hnswlib", "spacy", "nltk", "tqdm", "torch")

CODE = """
import json, sys
from fscore_lite.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
else:
    code = 0
print(json.dumps({"exit": code, "heavy": [m for m in %r if m in sys.modules]}))
""" % (HEAVY,)


@pytest.mark.parametrize("args", [["--help"], ["score", "--help"], ["q2", "--help"], ["kb", "--help"],
                                  ["models", "list"]])
def test_light_commands_load_no_model_code(args, tmp_path):
    env_args = ["--models-dir", str(tmp_path)] if args == ["models", "list"] else []
    proc = subprocess.run([sys.executable, "-c", CODE, *args, *env_args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["exit"] in (0, None)
    assert result["heavy"] == [], f"`fscore-lite {' '.join(args)}` imported {result['heavy']}"


def test_heavy_names_still_load_on_first_use():
    proc = subprocess.run([sys.executable, "-c", "import sys, fscore_lite\n"
                           "assert 'numpy' not in sys.modules\n"
                           "from fscore_lite import open_store, score_file, SentenceEmbedder, Bundle\n"
                           "print(open_store.__module__, score_file.__module__, 'numpy' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["fscore_lite.store", "fscore_lite.factscore.pipeline", "True"]
