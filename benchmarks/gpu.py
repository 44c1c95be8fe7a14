"""The GPU-backed encoder in one run beside sentence-transformers (fp16 on CUDA, fp32 on a CPU): encoding speed
and the fraction of the chip's arithmetic it uses, the paper's headline, ingestion into Qdrant Edge with where its
time goes, and the trainer at fp32 and mixed precision beside SentenceTransformerTrainer (issue 54).

1. Encoding: short sentences (STS-B + Quora) and long inputs (SciFact abstracts cut at 256 tokens), ``--rounds``
   interleaved, median; docs/s, tokens/s (real tokens, no padding), and tokens/s x FLOP/token over the device's
   peak (``--peak-tflops``, else a table by device name: dense fp16/bf16 tensor-core figures); min cosine to the
   anchor. Ours runs unpadded where it can (``unpadded``) and padded, to show what packing buys.
2. The most similar pair among ``--pairs`` sentences (encode + ``mine_pairs``).
3. ``upsert_texts`` of ``--ingest`` texts into an embedded Qdrant Edge collection with the encoder on the device:
   points/s, and its time split: encoding alone, the store's write alone (the same write with the vectors given),
   and how much of the two the pipeline overlapped.
4. Training (SoftmaxLoss on NLI, batch ``--train-batch``): ours fp32 and mixed precision, pairs/s inside the steps,
   beside sentence-transformers' SentenceTransformerTrainer (fp16 on CUDA; skipped without ``datasets``).

    python benchmarks/gpu.py --data ../shared/data                      # on the GPU machine
    python benchmarks/gpu.py --data ../shared/data --sentences 200 --abstracts 40 --pairs 300 --ingest 500 \
        --train-steps 6 --rounds 1                                       # a CPU check, minutes
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _data import read_corpus, read_quora_questions, read_scifact, read_stsb
from sentence_transformers import SentenceTransformer

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant._collection.vectors import default_batch_size
from sbert_qdrant.dedup import mine_pairs
from sbert_qdrant.encoder.loading import resolve_model_folder
from sbert_qdrant.training import SoftmaxLoss, Trainer, TrainingConfig, read_nli

#: Dense fp16/bf16 tensor-core peaks (TFLOP/s, no sparsity), by a part of the device's name.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0, "V100": 125.0}


def peak_flops(device: torch.device, given: float | None) -> float | None:
    """The device's peak FLOP/s: ``given`` (TFLOP/s), else the table's entry for a CUDA device (None: unknown)."""
    if given is not None:
        return given * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tflops * 1e12 for key, tflops in PEAK_TFLOPS.items() if key in name), None)


def flops_per_token(encoder: SentenceEncoder, mean_tokens: float) -> float:
    """Forward FLOPs per token: 2 per weight of a layer's matrices (q, k, v, output, the feed-forward pair; from the
    model's config, so int8 layers count too) plus attention's two (tokens x tokens) products (all-MiniLM-L6-v2:
    ~23 MFLOP at 128 tokens)."""
    config = encoder.transformer.model.config
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return layers * (2.0 * (4 * hidden * hidden + 2 * hidden * inner) + 4.0 * hidden * mean_tokens)


def synced(device: torch.device, run: Callable[[], Any]) -> tuple[Any, float]:
    """``run()``'s result and its wall seconds, the device drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return result, time.perf_counter() - start


def encoding(args: argparse.Namespace, device: torch.device, folder: str) -> SentenceEncoder:
    """Part 1: docs/s, tokens/s and the share of the chip, ours (unpadded and padded) beside the anchor."""
    a, b, _ = read_stsb(args.data / "stsb" / "stsb_train.tsv.gz")
    short = (a + b)[: args.sentences // 2] + read_quora_questions(
        args.data / "quora" / "quora_pairs_train.jsonl.gz", args.sentences - args.sentences // 2
    )
    long = read_scifact(args.data / "scifact", args.abstracts)[1]
    anchor = SentenceTransformer(folder, device=str(device))
    anchor.max_seq_length = 256
    if device.type == "cuda":
        anchor.half()
    ours = SentenceEncoder.load(folder, device=device, max_seq_length=256)
    ours_padded = SentenceEncoder.load(folder, device=device, max_seq_length=256)
    ours_padded.unpadded = False
    anchor_name = f"sentence-transformers {'fp16' if device.type == 'cuda' else 'fp32'}"
    engines: dict[str, Callable[[list[str]], np.ndarray]] = {
        anchor_name: lambda t: anchor.encode(t, batch_size=args.batch, normalize_embeddings=True),
        f"ours {ours.precision} unpadded": lambda t: np.asarray(ours.encode(t, batch_size=args.batch_ours)),
        f"ours {ours.precision} padded": lambda t: np.asarray(ours_padded.encode(t, batch_size=args.batch_ours)),
    }
    peak = peak_flops(device, args.peak_tflops)
    print(
        f"\n== 1. encoding on {describe(device)}: anchor batch {args.batch}, ours "
        f"{'the default call' if args.batch_ours is None else f'up to {args.batch_ours} texts'} and "
        f"{ours.batch_tokens} tokens a batch; peak {'unknown' if peak is None else f'{peak / 1e12:.0f} TFLOP/s'}"
    )
    for workload, texts in (("short", short), ("long (cut at 256)", long)):
        tokens = [len(row) for row in ours.transformer.tokenize(texts)[0]]
        per_token = flops_per_token(ours, float(np.mean(np.square(tokens)) / np.mean(tokens)))
        seconds: dict[str, list[float]] = {name: [] for name in engines}
        vectors: dict[str, np.ndarray] = {}
        for run in engines.values():
            run(texts[: min(len(texts), 256)])  # warm-up
        for _ in range(args.rounds):
            for name, run in engines.items():
                vectors[name], took = synced(device, lambda run=run, texts=texts: run(texts))
                seconds[name].append(took)
        base = statistics.median(seconds[anchor_name])
        print(f"-- {workload}: {len(texts)} texts, {sum(tokens)} tokens, ~{per_token / 1e6:.1f} MFLOP/token")
        print(f"{'engine':34} {'docs/s':>10} {'tokens/s':>12} {'x anchor':>9} {'% of peak':>9} {'min cos':>8}")
        for name in engines:
            took = statistics.median(seconds[name])
            rate = sum(tokens) / took
            share = "n/a" if peak is None else f"{100 * rate * per_token / peak:.2f}"
            cosine = float((unit(vectors[name]) * unit(vectors[anchor_name])).sum(axis=1).min())
            print(f"{name:34} {len(texts) / took:>10,.0f} {rate:>12,.0f} {base / took:>9.2f} {share:>9} {cosine:>8.5f}")
    return ours


def headline(args: argparse.Namespace, encoder: SentenceEncoder, device: torch.device) -> None:
    """Part 2: the most similar pair among ``--pairs`` real sentences, encode + search."""
    texts = read_corpus(args.data, args.pairs)
    encoder.encode(texts[:256], batch_size=args.batch_ours)
    vectors, encode_s = synced(device, lambda: np.asarray(encoder.encode(texts, batch_size=args.batch_ours)))
    pairs, mine_s = synced(device, lambda: mine_pairs(vectors, threshold=-1.0, top_k=1))
    print(
        f"\n== 2. most similar pair among {len(texts)} sentences: {encode_s + mine_s:.3f} s "
        f"(encode {encode_s:.3f} s, pair {mine_s:.3f} s); best pair {pairs[0] if pairs else None}"
    )


def ingestion(args: argparse.Namespace, encoder: SentenceEncoder, device: torch.device) -> None:
    """Part 3: upsert_texts into Edge with the encoder on the device, and where the time goes."""
    texts = read_corpus(args.data, args.ingest)
    texts = [
        f"{t} ({i // len(texts)})" if i >= len(texts) else t
        for i, t in enumerate(texts * math.ceil(args.ingest / max(1, len(texts))))
    ][: args.ingest]  # repeated sources made distinct, to reach the count
    with tempfile.TemporaryDirectory() as folder:
        collection = TextCollection("gpu_ingest", encoder=encoder, location=folder)
        batch = default_batch_size(encoder)  # the collection's encode_batch_size when given none
        vectors, encode_s = synced(device, lambda: np.asarray(encoder.encode_document(texts, batch_size=batch)))
        _, total_s = synced(device, lambda: collection.upsert_texts(texts))
        given = TextCollection("gpu_given", encoder=encoder, location=folder)
        _, write_s = synced(
            device, lambda: given.upsert_texts(texts, vectors=list(vectors), vectors_from=encoder.identity)
        )
    overlap = encode_s + write_s - total_s
    print(
        f"\n== 3. upsert_texts of {len(texts)} texts into Qdrant Edge (encoder batch {batch}, BM25 on): "
        f"{len(texts) / total_s:,.0f} points/s ({total_s:.2f} s)"
    )
    print(
        f"   encoding alone {encode_s:.2f} s ({len(texts) / encode_s:,.0f} texts/s); the store's write alone "
        f"(vectors given, BM25 counted) {write_s:.2f} s ({len(texts) / write_s:,.0f} points/s); overlapped "
        f"{max(0.0, overlap):.2f} s of the two; the rest of the write waited on the slower side"
    )


def training(args: argparse.Namespace, device: torch.device, folder: str) -> None:
    """Part 4: our trainer fp32 and mixed precision beside SentenceTransformerTrainer, pairs/s inside the steps."""
    pairs = read_nli(args.data / "nli" / "snli_train_subset_cat.tsv.gz")[: args.train_steps * args.train_batch]
    print(
        f"\n== 4. training: SoftmaxLoss, {len(pairs)} NLI pairs, batch {args.train_batch}, "
        f"{args.train_steps} steps on {describe(device)}"
    )
    mixed = "bf16" if device.type == "cpu" or torch.cuda.is_bf16_supported() else "fp16"
    for precision in ("fp32", mixed, "fp32", mixed):  # twice each, interleaved: the first of a kind warms up
        encoder = SentenceEncoder.load(folder, device=device, precision="fp32")
        config = TrainingConfig(max_steps=args.train_steps, batch_size=args.train_batch, precision=precision)  # type: ignore[arg-type]
        result = Trainer(encoder, [(SoftmaxLoss(encoder), pairs)], config).fit()
        print(f"ours {precision:5} {result.examples_per_second:>10,.0f} pairs/s (last loss {result.losses[-1]:.3f})")
    try:
        print(
            f"sentence-transformers {'fp16' if device.type == 'cuda' else 'fp32'} "
            f"{reference_training(folder, pairs, args, device):>10,.0f} pairs/s"
        )
    except ImportError as exc:
        print(f"sentence-transformers' trainer skipped: {exc}")


def reference_training(folder: str, pairs: list[Any], args: argparse.Namespace, device: torch.device) -> float:
    """SentenceTransformerTrainer with the same loss and settings: pairs/s between its steps (first 5 skipped)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses
    from transformers import TrainerCallback

    class Clock(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_end(self, *_: Any, **__: Any) -> None:
            self.times.append(time.perf_counter())

    model = SentenceTransformer(folder, device=str(device))
    loss = losses.SoftmaxLoss(model, model.get_embedding_dimension(), num_labels=3)
    columns = {
        "sentence1": [e.texts[0] for e in pairs],
        "sentence2": [e.texts[1] for e in pairs],
        "label": [int(e.label or 0) for e in pairs],
    }
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        arguments = SentenceTransformerTrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=args.train_batch,
            learning_rate=2e-5,
            max_steps=args.train_steps,
            warmup_ratio=0.1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            use_cpu=device.type == "cpu",
            fp16=device.type == "cuda",
            dataloader_drop_last=False,
        )
        SentenceTransformerTrainer(
            model=model, args=arguments, train_dataset=Dataset.from_dict(columns), loss=loss, callbacks=[clock]
        ).train()
    skip = min(5, len(clock.times) - 2)
    return args.train_batch * (len(clock.times) - 1 - skip) / (clock.times[-1] - clock.times[skip])


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"the CPU ({torch.get_num_threads()} threads, torch {torch.__version__})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder holding stsb/, quora/, scifact/, nli/")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--abstracts", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256, help="the anchor's batch")
    parser.add_argument(
        "--batch-ours", type=int, default=None, help="ours: texts a batch at most (default: the default call's)"
    )
    parser.add_argument("--pairs", type=int, default=10_000, help="sentences of the most-similar-pair headline")
    parser.add_argument("--ingest", type=int, default=100_000, help="texts upserted into Edge")
    parser.add_argument("--train-steps", type=int, default=150)
    parser.add_argument("--train-batch", type=int, default=64)
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's dense fp16/bf16 peak")
    parser.add_argument("--parts", nargs="+", default=["encode", "headline", "ingest", "train"])
    args = parser.parse_args()
    logging.getLogger("sbert_qdrant").setLevel(logging.ERROR)  # abstracts cut at 256 tokens are meant
    device = torch.device(args.device)
    folder = str(resolve_model_folder(None))
    print(f"sbert-qdrant GPU benchmark on {describe(device)}")
    encoder = encoding(args, device, folder) if "encode" in args.parts else SentenceEncoder.load(folder, device=device)
    if "headline" in args.parts:
        headline(args, encoder, device)
    if "ingest" in args.parts:
        ingestion(args, encoder, device)
    if "train" in args.parts:
        training(args, device, folder)


if __name__ == "__main__":
    main()
