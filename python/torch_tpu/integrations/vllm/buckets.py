"""Padded sizes for the shapes of a serving step.

XLA programs have static shapes, and torch_tpu compiles one program per op and
input shape, so each distinct (tokens, sequences, query length, cached blocks)
would compile new programs. Every size is padded up to a power of two: a size
range of N then costs log2(N) programs per op, padding wastes at most half of a
step, and the set is fixed by the limits alone (max_num_batched_tokens,
max_num_seqs, max_model_len), so the warm-up can compile every one of them.
"""


def bucket(n: int, floor: int, cap: int) -> int:
    """The smallest power of two >= n, at least `floor`, at most `cap` (n <= cap)."""
    if n > cap:
        raise ValueError(f"vLLM on tpu: size {n} is over its limit {cap}")
    size = floor
    while size < n:
        size *= 2
    return min(size, cap)


def all_buckets(floor: int, cap: int) -> list[int]:
    """Every size bucket() can return for this floor and cap, ascending."""
    sizes, size = [], floor
    while size < cap:
        sizes.append(size)
        size *= 2
    return sizes + [cap]
