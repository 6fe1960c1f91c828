"""Groups a `perf report --no-children --sort sym -g none` listing of `pagedkv serve` by what the
code does, and prints one row per group: the percent of the samples in it. The first pattern a
symbol matches names its group (bench/serve/profile_serve.sh runs it; /usr/bin/python3, nothing
installed):

    /usr/bin/python3 bench/serve/profile_groups.py out/profile_serve/symbols.txt
"""
import re
import sys

GROUPS = [
    ("attention", r"Attend|PagedAttention|SideRows|ExpShifted"),
    ("int8 matmul (tiles, quantize x)", r"int8_kernels|Int8|QuantizeBlock"),
    ("fp32 matmul", r"Packed|PanelRows|RowTwoPanels|QuantLinear|Gemm|LmHead|Linear"),
    ("thread pool", r"ThreadPool|ParallelFor"),
    ("other per-token ops", r"SwiGlu|RmsNorm|RotateHeads|StoreKvRow|Rope|Gather|Embedding|expf|"
                            r"Sample|QuantValue|ReshapeAndCache|Softmax|Logit"),
    ("scheduler and KV cache manager", r"Scheduler|KvCacheManager|BlockPool|BlockHash|"
                                       r"PrefixCache|FreeBlock|Allocat|Hybrid"),
    ("HTTP server, tokenizer, JSON", r"server::|httplib|json|Json|Sse|Completion|Tokeniz|Detok|"
                                     r"Utf8|simdjson"),
    ("kernel", r"\[k\]"),
    ("locks, allocation, libc", r"absl|malloc|free|memset|memcpy|memmove|syscall|futex|pthread|"
                                r"operator new|operator delete"),
]


def main(path: str) -> None:
    totals = {name: 0.0 for name, _ in GROUPS}
    rest, rest_top = 0.0, []
    with open(path, encoding="utf-8", errors="replace") as listing:
        for line in listing:
            m = re.match(r"\s*([0-9.]+)%\s+(.*)", line)
            if not m:
                continue
            share, symbol = float(m.group(1)), m.group(2)
            for name, pattern in GROUPS:
                if re.search(pattern, symbol):
                    totals[name] += share
                    break
            else:
                rest += share
                rest_top.append((share, symbol))
    print("| group | share of the server's samples |\n| --- | ---: |")
    for name, _ in GROUPS:
        print(f"| {name} | {totals[name]:.1f}% |")
    print(f"| the rest | {rest:.1f}% |")
    for share, symbol in sorted(rest_top, reverse=True)[:5]:
        print(f"  rest: {share:.2f}% {symbol[:100]}")


if __name__ == "__main__":
    main(sys.argv[1])
