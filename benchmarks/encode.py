"""Encoding throughput and quality: sbert-qdrant vs sentence-transformers, interleaved in one run.

CPU: sentences/s on 5,000 real sentences (STS-B + Quora) for sentence-transformers fp32 and ours in
fp32 / bf16 / int8, plus STS-B dev Spearman and fp32 parity. CUDA (when present): fp16 vs ours
fp16/bf16 at batch 256 with peak GPU memory.

    python benchmarks/encode.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from _data import cpu_summary, read_quora_questions, read_stsb, sts_spearman
from sentence_transformers import SentenceTransformer

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.encoder.loading import resolve_model_folder

Encode = Callable[[list[str]], np.ndarray]


def _timed(encode: Encode, texts: list[str]) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    encode(texts)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return len(texts) / (time.perf_counter() - start)


def _peak_gib(encode: Encode, texts: list[str]) -> float:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    encode(texts)
    return torch.cuda.max_memory_allocated() / 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder holding stsb/ and quora/")
    parser.add_argument("--sentences", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (median reported)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 32 on CPU, 256 on CUDA")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    batch = args.batch_size or (256 if cuda else 32)
    s1, s2, _ = read_stsb(args.data / "stsb" / "stsb_train.tsv.gz")
    stsb_texts = list(dict.fromkeys(s1 + s2))[: args.sentences // 2]
    texts = stsb_texts + read_quora_questions(
        args.data / "quora" / "quora_pairs_train.jsonl.gz", args.sentences - len(stsb_texts)
    )
    dev1, dev2, gold = read_stsb(args.data / "stsb" / "stsb_dev.tsv.gz")

    folder = str(resolve_model_folder(None))
    reference = SentenceTransformer(folder, device=device)
    reference_name = "sentence-transformers fp32"
    if cuda:
        reference.half()
        reference_name = "sentence-transformers fp16"
    precisions = ["fp32", "fp16", "bf16"] if cuda else ["fp32", "bf16", "int8"]
    encoders = {p: SentenceEncoder.load(folder, device=device, precision=p) for p in precisions}  # type: ignore[arg-type]
    runners: dict[str, Encode] = {reference_name: lambda t: reference.encode(t, batch_size=batch)}
    for p, enc in encoders.items():
        runners[f"sbert-qdrant {p}"] = lambda t, enc=enc: enc.encode(t, batch_size=batch)  # type: ignore[misc]

    print(
        f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} batch={batch} "
        f"sentences={len(texts)} rounds={args.rounds}\n{cpu_summary()}"
    )
    for run in runners.values():  # warm-up
        run(texts[:256])
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            rates[name].append(_timed(run, texts))

    dev_vectors = {name: np.concatenate([run(dev1), run(dev2)]) for name, run in runners.items()}
    base = statistics.median(rates[reference_name])
    print(f"\n{'encoder':<30}{'sent/s':>9}{'vs ref':>9}{'STS-B dev':>11}{'vs ref':>9}")
    ref_sp = sts_spearman(*np.split(dev_vectors[reference_name], 2), gold)
    for name in runners:
        sp = sts_spearman(*np.split(dev_vectors[name], 2), gold)
        rate = statistics.median(rates[name])
        print(f"{name:<30}{rate:>9.1f}{rate / base:>8.2f}x{sp:>11.3f}{sp - ref_sp:>+9.3f}")
    ref_all, ours_fp32 = dev_vectors[reference_name], dev_vectors["sbert-qdrant fp32"]
    cos = (ref_all * ours_fp32).sum(1) / np.linalg.norm(ref_all, axis=1) / np.linalg.norm(ours_fp32, axis=1)
    print(f"\nfp32 parity on {len(cos)} STS-B dev sentences: min cosine {cos.min():.7f}, mean {cos.mean():.7f}")
    if cuda:
        for name, run in runners.items():
            print(f"peak GPU memory {name}: {_peak_gib(run, texts):.3f} GiB")


if __name__ == "__main__":
    main()
