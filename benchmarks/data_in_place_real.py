"""Real data read where it lies, end to end from the command line: each run's `summary.json` and
the loader rows of `trainspeed data bench` are copied under `--out` (docs/results/data_in_place_real).

    .venv/bin/python benchmarks/data_in_place_real.py [--work /tmp/trainspeed-real] [--out docs/results/data_in_place_real]

1. `digits_folder`: scikit-learn's UCI digits (1,797 8x8 images, in its wheel) written as a PNG
   class-folder tree (ROOT/digitN/NNNN.png), trained with `timm:resnet18` at 16 px (10 epochs at most) to 90%
   validation accuracy (`--until val/accuracy>=0.9 --stop-at-target`).
2. `digits_hf`: the same digits as a Hugging Face dataset on disk (`save_to_disk`: an Image and a
   ClassLabel column), the same training.
3. `stdlib_tokens`: the standard library's Python sources as one uint16 `.bin` of their bytes (ids
   0..255), trained with `hf:gpt2` (2 layers, 64 wide, windows of 128) on 2 ranks.

Every dataset is written under `--work` (never into the repository) and left as it was: the
script checks each folder's listing, sizes and modification times before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
from PIL import Image

VISION_SIZE = "tiny,res=16,classes=10"
VISION = ["--workload", "timm:resnet18", "--size", VISION_SIZE, "--batch-size-per-device", "32", "--epochs", "10",
          "--num-workers", "1", "--eval-every", "27", "--until", "val/accuracy>=0.9", "--stop-at-target",
          "--noise-scale", "off"]
GPT2_SIZE = "tiny,seq=128,n_layer=2,n_embd=64,n_head=2,vocab_size=256"
GPT2 = ["--workload", "hf:gpt2", "--size", GPT2_SIZE, "--batch-size-per-device", "16", "--steps", "300",
        "--nproc", "2", "--eval-every", "100", "--noise-scale", "off"]


def digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return (data.images * (255 / 16)).round().astype(np.uint8), data.target.astype(np.int64)


def write_digit_folder(root: Path) -> Path:
    if root.exists():
        return root
    images, labels = digits()
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for number, (pixels, label) in enumerate(zip(images, labels)):
        folder = staging / f"digit{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels, mode="L").save(folder / f"{number:04d}.png")
    staging.rename(root)
    return root


def write_digit_dataset(root: Path) -> Path:
    if root.exists():
        return root
    import datasets

    images, labels = digits()
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=[str(d) for d in range(10)])})
    datasets.disable_progress_bars()
    dataset = datasets.Dataset.from_dict({"image": [Image.fromarray(pixels, mode="L") for pixels in images],
                                          "label": labels.tolist()}, features=features)
    dataset.save_to_disk(str(root))
    return root


def write_stdlib_tokens(path: Path, limit: int = 4_000_000) -> Path:
    if path.exists():
        return path
    library = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for source in sorted(library.glob("*.py")):
        chunks.append(source.read_bytes())
        total += len(chunks[-1])
        if total >= limit:
            break
    ids = np.frombuffer(b"".join(chunks)[:limit], dtype=np.uint8).astype(np.uint16)
    ids.tofile(path.with_suffix(".partial"))
    path.with_suffix(".partial").rename(path)
    return path


def snapshot(path: Path) -> str:
    """A hash of every file's relative path, size and modification time under `path` (or of the file)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        status = file.stat()
        digest.update(f"{file.relative_to(path.parent)}\t{status.st_size}\t{status.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def trainspeed(*argv: str) -> None:
    command = [sys.executable, "-m", "trainspeed", *argv]
    print("$", shlex.join(["trainspeed", *argv]), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def run(name: str, data: Path, workload: list[str], bench: list[str], work: Path, out: Path) -> None:
    before = snapshot(data)
    trainspeed("data", "verify", str(data))
    run_dir = work / "runs" / name
    shutil.rmtree(run_dir, ignore_errors=True)
    trainspeed("train", *workload, "--data", str(data), "--no-progress", "--out", str(run_dir))
    rows = out / f"{name}_data_bench.jsonl"
    rows.unlink(missing_ok=True)
    trainspeed("data", "bench", str(data), *bench, "--out", str(rows))
    if snapshot(data) != before:
        raise SystemExit(f"{data} changed while it was read")
    (out / name).mkdir(parents=True, exist_ok=True)
    for file in ("summary.json", "metrics.jsonl"):
        shutil.copyfile(run_dir / file, out / name / file)
    summary = json.loads((run_dir / "summary.json").read_text())
    print(f"{name}: {summary.get('final_validation') or summary.get('validation')}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/trainspeed-real"))
    parser.add_argument("--out", type=Path, default=Path("docs/results/data_in_place_real"))
    parser.add_argument("--only", nargs="+", choices=("digits_folder", "digits_hf", "stdlib_tokens"),
                        default=["digits_folder", "digits_hf", "stdlib_tokens"])
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    vision_bench = ["--workload", "timm:resnet18", "--size", VISION_SIZE, "--batch-size", "32", "--workers", "0,1,2"]
    if "digits_folder" in args.only:
        run("digits_folder", write_digit_folder(args.work / "digits"), VISION, vision_bench, args.work, args.out)
    if "digits_hf" in args.only:
        run("digits_hf", write_digit_dataset(args.work / "digits_hf"), VISION, vision_bench, args.work, args.out)
    if "stdlib_tokens" in args.only:
        run("stdlib_tokens", write_stdlib_tokens(args.work / "stdlib.bin"), GPT2,
            ["--workload", "hf:gpt2", "--size", GPT2_SIZE, "--batch-size", "16", "--workers", "0,1"],
            args.work, args.out)


if __name__ == "__main__":
    main()
