"""The CPU judge's dtype: bfloat16 only where the CPU has it natively, a config value winning, said why."""

from __future__ import annotations

import pytest

from pipeline.judge.hardware import engine_dtype, read_cpu

EPYC_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse sse2 ssse3 sse4_1 sse4_2 avx f16c avx2 fma bmi2
"""
XEON_BF16 = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx avx2 avx512f avx512bw avx512_vnni avx512_bf16 amx_bf16 amx_tile
"""
XEON_AVX512 = """processor\t: 0
model name\t: Intel(R) Xeon(R) Gold 6248
flags\t\t: fpu sse avx avx2 avx512f avx512bw avx512_vnni
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm sve i8mm bf16
"""


@pytest.mark.parametrize(
    "cpuinfo,native", [(EPYC_AVX2, False), (XEON_AVX512, False), (XEON_BF16, True), (GRAVITON3, True)]
)
def test_native_bfloat16_from_the_flags(cpuinfo, native):
    cpu = read_cpu(cpuinfo)
    assert cpu.native_bf16 is native
    choice = engine_dtype(None, on_gpu=False, cpu=cpu)
    assert choice.dtype == ("bfloat16" if native else "float32")
    assert ("has native bfloat16" if native else "no native bfloat16") in choice.reason


def test_the_config_wins_and_a_gpu_keeps_the_model_dtype():
    cpu = read_cpu(EPYC_AVX2)
    assert engine_dtype("bfloat16", on_gpu=False, cpu=cpu).dtype == "bfloat16"
    assert engine_dtype("bfloat16", on_gpu=False, cpu=cpu).reason == "set by judge.engine.dtype"
    assert engine_dtype(None, on_gpu=True, cpu=cpu).dtype is None


def test_the_description_names_model_and_flags():
    text = read_cpu(XEON_BF16).describe()
    assert "Xeon(R) Platinum 8480+" in text and "avx512_bf16" in text and "amx_bf16" in text
    assert "flags: avx2" in read_cpu(EPYC_AVX2).describe()
    # no /proc/cpuinfo (macOS, a container hiding it): no flags known, so no native bfloat16 is assumed
    assert read_cpu("").flags == frozenset() and engine_dtype(None, False, read_cpu("")).dtype == "float32"
