"""What a stage-1 setting costs: the verifier build's SNLI training alone, for other settings.

``python -m bench.snli_settings PAIRS [EPOCHS] [--max-length N]`` runs
:func:`fscore_lite_models.verifier.snli.train_snli` exactly as ``fscore-lite models train
verifier --snli-pairs PAIRS --epochs EPOCHS`` runs it (seed 0, 2 threads, bfloat16 autocast
where the CPU has it, the same registry inputs), and prints its report: SNLI test accuracy and
training seconds. Nothing is exported or installed. Needs the build inputs (a verifier build has
downloaded them) and torch.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", type=int)
    ap.add_argument("epochs", type=float, nargs="?", default=1.0)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the build's)")
    ap.add_argument("--batch-size", type=int, default=None, help="pairs per step (default: the build's)")
    a = ap.parse_args()

    from fscore_lite.settings import Settings
    from fscore_lite_models.verifier.snli import SnliConfig, train_snli
    from fscore_lite_models.verifier.sources import minilm_checkpoint, snli_files
    from fscore_lite_models.verifier.torch_train import cpu_has_bf16

    home = Path(Settings().home)
    files = snli_files(home, log=lambda m: None)
    ckpt = minilm_checkpoint(home, log=lambda m: None)
    t = time.monotonic()
    cfg = SnliConfig(pairs=a.pairs, epochs=a.epochs, max_length=a.max_length)
    cfg.lr = a.lr if a.lr is not None else cfg.lr
    cfg.batch_size = a.batch_size if a.batch_size is not None else cfg.batch_size
    _, report = train_snli(ckpt, files, cfg,
                           seed=0, threads=a.threads, bf16=cpu_has_bf16(), log=lambda m: None)
    report["wall_s"] = round(time.monotonic() - t, 1)
    report["lr"], report["batch_size"] = cfg.lr, cfg.batch_size
    print(json.dumps(report))


if __name__ == "__main__":
    main()
