"""Padded sizes for the shapes of a serving step.

XLA programs have static shapes, and a step runs as one fused program per
distinct set of input shapes. A step's shapes depend on two padded sizes only:

- the token count T, padded to a power of two (at least 16, at most
  max_num_batched_tokens), and from 512 tokens also to 1.25, 1.5 and 1.75
  times one (`token_sizes`): a step that large is mostly its matmuls, whose
  time grows with the padded tokens (the benchmark's prefill steps of 32
  prompts, 1900-2330 tokens, ran 3072 wide with only the 1.5x size, now
  2048 or 2560); the sequence count and the query layout of attention are
  functions of T (`query_layout`), not sizes of their own;
- the key length, in cache blocks, of the longest sequence, padded to a power
  of two (at most the blocks of max_model_len); in a decode step (at most
  max_num_seqs tokens, a token a row) also to 1.5 times a power of two
  (`key_sizes`): there attention over the keys is most of the program (2 of
  its 3 ms on the benchmark's model, 32 rows of 256 keys), which 12 blocks
  instead of 16 cut from 2.99 to 2.64 ms, for a key size more per octave in
  each decode token bucket (10 more programs for the benchmark's 60).

The reachable set is then |T buckets| x |key buckets| (less the pairs no batch
can make, `step_buckets`), about log2(max_num_batched_tokens) x
log2(max_model_len / block_size): tens of programs, few enough for a warm-up
to compile every one at start-up. Padding wastes under half of a step of
fewer than 512 tokens, under a fifth of a larger one, and under a third of
a decode step's keys.
"""
import functools


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


def with_steps(sizes: list[int], start: int, cap: int, parts: int) -> list[int]:
    """`sizes` (all_buckets') and, from `start` on, the sizes that cut each
    octave into `parts` equal steps (parts=2: the 1.5x midpoints), below
    `cap`, ascending."""
    inner = {s * (parts + k) // parts for s in sizes if s >= start for k in range(1, parts)}
    return sorted(set(sizes) | {s for s in inner if s < cap})


def smallest_holding(sizes, n: int, cap: int) -> int:
    """The smallest of `sizes` (ascending, up to `cap`) that holds n <= cap."""
    if n > cap:
        raise ValueError(f"vLLM on tpu: size {n} is over its limit {cap}")
    return next(s for s in sizes if s >= n)


TOKEN_FLOOR = 16
FINE_TOKENS = 512   # from here on token buckets are a quarter of an octave apart


@functools.cache   # asked at every step
def token_sizes(max_tokens: int) -> tuple[int, ...]:
    """The token counts a step is padded to, ascending (module docstring)."""
    cap = max(TOKEN_FLOOR, max_tokens)
    return tuple(with_steps(all_buckets(TOKEN_FLOOR, cap), FINE_TOKENS, cap, 4))


def token_bucket(num_tokens: int, max_tokens: int) -> int:
    """The smallest of token_sizes() that holds num_tokens (<= max_tokens)."""
    return smallest_holding(token_sizes(max_tokens), num_tokens, max(TOKEN_FLOOR, max_tokens))


def query_layout(t_pad: int, max_seqs: int) -> tuple[int, int]:
    """(rows, chunk) of attention's queries for a token bucket.

    Each sequence's query tokens are cut into chunks of `chunk` tokens, one
    chunk a row that attends to its own sequence's keys. A batch of n <=
    min(max_seqs, T) sequences needs sum(ceil(q_i / chunk)) < T / chunk + n
    rows, so `rows` depends on T alone. Up to max_seqs tokens (decode) a row
    is one token; past that the chunk grows with T so that rows stay at most
    2 * max_seqs and rows * chunk (the query slots) about 3 * T at most.
    """
    if t_pad <= max_seqs:
        return t_pad, 1
    chunk = bucket(-(-t_pad // max_seqs), 1, t_pad)
    return -(-t_pad // chunk) + max_seqs, chunk


@functools.cache   # asked at every step
def key_sizes(t_pad: int, max_seqs: int, max_blocks: int) -> tuple[int, ...]:
    """The key lengths, in blocks, a step of t_pad tokens is padded to,
    ascending: powers of two, and for a decode step their 1.5x midpoints."""
    sizes = all_buckets(1, max_blocks)
    return tuple(with_steps(sizes, 2, max_blocks, 2) if t_pad <= max_seqs else sizes)


def key_bucket(blocks: int, t_pad: int, max_seqs: int, max_blocks: int) -> int:
    """The smallest of key_sizes() that holds `blocks` (blocks <= max_blocks)."""
    return smallest_holding(key_sizes(t_pad, max_seqs, max_blocks), blocks, max_blocks)


def step_buckets(max_tokens: int, max_seqs: int, max_blocks: int, block_size: int):
    """Every (token bucket, key-block bucket) a step can reach: T tokens over
    at most max_seqs sequences of at most L blocks each need
    max_seqs * L * block_size > the bucket below T."""
    tokens = token_sizes(max_tokens)
    pairs = []
    for i, t in enumerate(tokens):
        below = tokens[i - 1] if i else 0
        pairs += [(t, b) for b in key_sizes(t, max_seqs, max_blocks) if max_seqs * b * block_size > below]
    return pairs
