"""Whether two builds of llama-cpp-python compute the same bits with a kernel.

    python -m bench.kernel_logits [--kernel portable|auto|NAME] [--site DIR ...] [--model GGUF]

Each ``--site`` is a folder holding an installed ``llama_cpp`` and its ``bin/`` variants (an unpacked
wheel, or a venv's site-packages); none: this environment's own build. In a process of its own per
build, it loads the kernel, evaluates a fixed prompt with the LLM (the 0.5B test model by default)
and prints the sha256 of the prompt's logits and of 48 greedy tokens; the builds agree when every
line is the same. A build's shared libraries differ byte for byte from one compile to the next
(temporary paths end up in them), so this is how a build is compared with another.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PROMPT = ("Please breakdown the following sentence into independent facts: Marie Curie was a Polish and "
          "naturalised-French physicist and chemist who conducted pioneering research on radioactivity.")


def one_build(kernel: str, model: str) -> dict:
    """The kernel this process loaded and the sha256s of its logits and greedy text."""
    import hashlib

    import llama_cpp
    import numpy as np

    from fscore_lite.backends.llama_kernels import ensure_kernel

    k = ensure_kernel(kernel)
    llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_threads=1, verbose=False, logits_all=True, seed=0)
    tokens = llm.tokenize(PROMPT.encode())
    llm.eval(tokens)
    logits = np.asarray(llm.scores[: len(tokens)], dtype=np.float32)
    llm.reset()
    text = llm.create_completion(PROMPT, max_tokens=48, temperature=0.0)["choices"][0]["text"]
    return {"llama_cpp": str(Path(llama_cpp.__file__).parent), "kernel": k.name, "prompt_tokens": len(tokens),
            "logits_sha256": hashlib.sha256(logits.tobytes()).hexdigest(),
            "text_sha256": hashlib.sha256(text.encode()).hexdigest()}


def default_model() -> str:
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings

    bundle = Bundle(Settings().models_dir)
    return str(bundle.verify_file(bundle.get("qwen2.5-coder-0.5b-instruct-q4_k_m").files[0]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_logits", description=__doc__.strip().splitlines()[0])
    ap.add_argument("--kernel", default="portable")
    ap.add_argument("--site", action="append", default=[], help="a folder with llama_cpp/ and bin/ (repeatable)")
    ap.add_argument("--model", help="a GGUF file (default: the installed 0.5B test model)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child: this process's build only
    args = ap.parse_args(argv)
    model = args.model or default_model()
    if args.one:
        print(json.dumps(one_build(args.kernel, model)))
        return 0
    rows = []
    for site in args.site or [None]:
        env_path = [str(Path(site).resolve())] if site else []
        code = ("import sys; sys.path[:0] = %r; from bench.kernel_logits import main; "
                "sys.exit(main(['--one', '--kernel', %r, '--model', %r]))" % (env_path, args.kernel, model))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1])
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for r in rows:
        print(f"{r['llama_cpp']}: kernel {r['kernel']}, logits {r['logits_sha256'][:16]}…, text {r['text_sha256'][:16]}…")
    same = len({(r["kernel"], r["logits_sha256"], r["text_sha256"]) for r in rows}) == 1
    if len(rows) > 1:
        print("the same bits" if same else "the builds differ")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
