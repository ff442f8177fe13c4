"""Audit speed on a large synthetic .so (goal: < 1 s for 1 GB).

Real bundles first: the probe's attn.hip is compiled with the detected compiler for gfx90a+gfx942,
once plain and once with --offload-compress (CCOB). Their .hip_fatbin bundles are then written back
to back (4096-aligned, as the linker lays out many TUs) into a hand-made ELF64 file until its
.hip_fatbin reaches --size-gb. A second file is sparse: one real bundle, then a 1 GB hole in
.hip_fatbin (a huge section with little in it). Each file is audited --repeat times; the first run
after writing has the page cache warm (the file was just written); --drop-cache is not attempted.

    python benchmarks/bench_audit.py [--size-gb 1] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import mmap
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from rocmbuild.artifacts import audit, elf
from rocmbuild.core.errors import ToolchainError
from rocmbuild.core.run import run
from rocmbuild.host.compiler import detect, hip_env

REPO = Path(__file__).resolve().parents[1]
PAGE = 4096


def real_bundles(obj: Path) -> list[bytes]:
    data = obj.read_bytes()
    sec = next(s for s in elf.elf_sections(data) if s.name == ".hip_fatbin")
    found = list(elf.bundles_in(data, sec.offset, sec.offset + sec.size))
    starts = [b.offset for b in found] + [sec.offset + sec.size]
    return [data[a:b].rstrip(b"\0") for a, b in zip(starts, starts[1:], strict=False)]


def write_elf(path: Path, fatbin_chunks, fatbin_size: int, wrappers: bool) -> None:
    """ELF64 shared object: header, .hip_fatbin at file offset = vaddr 4096 (streamed from
    ``fatbin_chunks``, then a hole up to ``fatbin_size``), optionally .hipFatBinSegment with one
    HIPF wrapper per bundle (as the linker writes them in a real .so), .shstrtab, section headers.
    """
    names = b"\0.hip_fatbin\0.shstrtab\0.hipFatBinSegment\0"
    starts = []
    with open(path, "wb") as f:
        f.seek(PAGE)
        for chunk in fatbin_chunks:
            starts.append(f.tell())
            f.write(chunk)
        f.seek(PAGE + fatbin_size)
        seg = b"".join(struct.pack("<IIQQ", 0x48495046, 1, s, 0) for s in starts)
        seg = seg if wrappers else b""
        seg_off = f.tell()
        f.write(seg)
        names_off = f.tell()
        f.write(names)
        shoff = f.tell()
        f.write(struct.pack("<IIQQQQIIQQ", *([0] * 10)))
        f.write(struct.pack("<IIQQQQIIQQ", 1, 1, 2, PAGE, PAGE, fatbin_size, 0, 0, PAGE, 0))
        f.write(struct.pack("<IIQQQQIIQQ", 13, 3, 0, 0, names_off, len(names), 0, 0, 1, 0))
        f.write(struct.pack("<IIQQQQIIQQ", 23, 1, 3, seg_off, seg_off, len(seg), 0, 0, 8, 0))
        f.seek(0)
        f.write(struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + b"\0" * 9, 3, 62, 1, 0,
                            0, shoff, 0, 64, 0, 0, 64, 4, 2))


def repeated(bundles: list[bytes], total: int):
    written, i = 0, 0
    while True:
        b = bundles[i % len(bundles)]
        padded = b + b"\0" * (-len(b) % PAGE)
        if written + len(padded) > total:
            return
        yield padded
        written += len(padded)
        i += 1


def bench(path: Path, repeat: int) -> tuple[float, audit.WheelAudit]:
    times, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = audit.audit_file(path, ["gfx90a", "gfx942"])
        times.append(time.perf_counter() - t0)
    assert res is not None
    return statistics.median(times), res


def _s(seconds: object) -> str:
    assert isinstance(seconds, float)
    return "< 1 ms" if seconds < 0.001 else f"{seconds:.2f} s"


def table(out: dict[str, object], sizes: list[int]) -> None:
    """The Markdown table of docs/dev/benchmarks-notebook.md on stdout."""
    gib = f"{int(out['size_bytes']) / 1024**3:g} GiB"  # type: ignore[call-overload]
    rows = []
    for key, what in (("dense_wrappers_True", "dense, with `.hipFatBinSegment` wrappers (like a "
                       "linked .so)"),
                      ("dense_wrappers_False", "dense, no wrappers (probes page boundaries, skips "
                       "each bundle by its size)"),
                      ("sparse_wrappers_True", "sparse: one bundle + a hole, with wrappers"),
                      ("sparse_wrappers_False", "sparse, no wrappers")):
        r = out[key]
        assert isinstance(r, dict)
        rows.append(f"| {gib} {what} | {r['bundles']} | **{_s(r['seconds'])}** |")
    print(f"Real bundles of `attn.hip` for gfx90a + gfx942 ({out['compiler']}): plain "
          f"({sizes[0]:,} bytes) and `--offload-compress` ({sizes[-1]:,} bytes), repeated, "
          f"4096-aligned, in the `.hip_fatbin` of a hand-made ELF64 .so. Goal: < 1 s.")
    print()
    print("| file | bundles | audit |")
    print("|---|---|---|")
    print("\n".join(rows))
    print()
    print(f"One `mmap.find` over the sparse file's pages: {_s(out['scan_all_pages_seconds'])}.")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    size = int(args.size_gb * 1024**3)
    try:
        c = detect()
    except ToolchainError as e:
        print(f"skipped: no HIP compiler ({e})")
        return 77  # benchmarks/run.py: cannot run on this machine
    err = sys.stderr  # progress; the Markdown table goes to stdout
    out: dict[str, object] = {"compiler": f"{c.path} {c.version}", "size_bytes": size}
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        t = Path(tmp)
        src = REPO / "probes/hip-attention/csrc/attn.hip"
        for name, extra in (("plain.o", []), ("ccob.o", ["--offload-compress"])):
            run(c.compile_argv(src, t / name, ["gfx90a", "gfx942"], ["-fPIC", "-c", *extra]),
                env=hip_env(), capture=True)
        bundles = real_bundles(t / "plain.o") + real_bundles(t / "ccob.o")
        kinds = [k.bundle_kinds for k in (audit.audit_file(t / n, []).objects[0]
                                          for n in ("plain.o", "ccob.o"))]
        print(f"real bundles: {[len(b) for b in bundles]} bytes, kinds {kinds}", file=err)
        for wrappers in (True, False):
            how = "with .hipFatBinSegment" if wrappers else "no wrappers (page probing)"
            big = t / "big.so"
            t0 = time.perf_counter()
            write_elf(big, repeated(bundles, size), size, wrappers)
            gib = big.stat().st_size / 1024**3
            print(f"wrote {gib:.2f} GiB in {time.perf_counter() - t0:.1f} s", file=err)
            dt, res = bench(big, args.repeat)
            (so,) = res.objects
            print(f"dense  1 GiB, {len(so.bundles)} bundles ({','.join(so.bundle_kinds)}), {how}: "
                  f"{dt * 1000:.0f} ms, archs {so.archs}", file=err)
            out[f"dense_wrappers_{wrappers}"] = {"seconds": dt, "bundles": len(so.bundles),
                                                 "archs": so.archs}
            big.unlink()
            sparse = t / "sparse.so"
            write_elf(sparse, [bundles[0]], size, wrappers)
            dt, res = bench(sparse, args.repeat)
            print(f"sparse 1 GiB, {len(res.objects[0].bundles)} bundle + hole, {how}: "
                  f"{dt * 1000:.0f} ms", file=err)
            out[f"sparse_wrappers_{wrappers}"] = {"seconds": dt,
                                                  "bundles": len(res.objects[0].bundles)}
        # the raw cost floor: touching every page of the mapping (what a naive read would do)
        with open(sparse, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            t0 = time.perf_counter()
            m.find(b"never-there-magic")
            out["scan_all_pages_seconds"] = time.perf_counter() - t0
        print(f"(one mmap.find over the sparse file's pages: "
              f"{out['scan_all_pages_seconds']:.2f} s)", file=err)
        table(out, sizes=[len(b) for b in bundles[:1]] + [len(b) for b in bundles[-1:]])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
