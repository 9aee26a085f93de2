"""Pallas kernels in interpret form: the lowering rules jax_lower.py uses for
`pallas_call` and `pl.kernel`'s `mpmd_map` on every plugin that is not a TPU.

Aliasing. Where an input is aliased to an output and both are whole arrays
in HBM (memory space ANY or HBM, no blocking), Mosaic hands the kernel one
buffer for both: a write through the input's ref is the output's value, and
a read of the input sees the kernel's own earlier writes. Pallas' interpret
form gives the kernel two buffers (the output starts as a copy of the input)
and keeps only what was written to the output's, so writes through the
input are lost. That is how a ref a function creates (`jax.new_ref`, which
Helion's TPU pipelines use to alias HBM) reaches a kernel: JAX's state
discharge passes it in as an input aliased to an extra output, and the
kernel writes through the input. So before lowering, each such pair's input
variable in the kernel's jaxpr is replaced by its output's: the kernel reads
and writes the one buffer, as on a TPU. Blocked or VMEM operands are copied
in and out by Mosaic too, so their aliases keep interpret form's semantics.
"""
from __future__ import annotations


def _whole_array_in_hbm(memory_space) -> bool:
    return getattr(memory_space, "value", None) in ("any", "hbm")


def _one_buffer(jaxpr, pairs):
    """jaxpr with invars[i] replaced by invars[o] for each (i, o) in pairs;
    effects recomputed for the new uses."""
    from jax._src import core as jax_core
    from jax._src.interpreters import partial_eval as pe

    if not pairs:
        return jaxpr
    swap = {jaxpr.invars[i]: jaxpr.invars[o] for i, o in pairs}

    def sub(atoms):
        return [swap.get(a, a) if isinstance(a, jax_core.Var) else a for a in atoms]

    eqns = [e.replace(invars=sub(e.invars)) for e in jaxpr.eqns]
    outvars = sub(jaxpr.outvars)
    effects = pe.make_jaxpr_effects(jaxpr.constvars, jaxpr.invars, outvars, eqns)
    return jaxpr.replace(eqns=eqns, outvars=outvars, effects=effects)


def _pallas_call_pairs(grid_mapping, input_output_aliases):
    """The (input, output) jaxpr positions of pallas_call's aliases that
    Mosaic runs on one buffer. An alias's input index counts the scalar
    prefetch operands, as the kernel's invars do."""
    n_index = grid_mapping.num_index_operands
    n_in = grid_mapping.num_inputs
    mappings = grid_mapping.block_mappings
    pairs = []
    for i, o in input_output_aliases:
        bin_, bout = mappings[i - n_index], mappings[n_in + o]
        if all(_whole_array_in_hbm(b.transformed_block_aval.memory_space)
               and b.has_trivial_window() for b in (bin_, bout)):
            pairs.append((i, n_index + n_in + o))
    return pairs


def _mpmd_map_pairs(in_avals, out_avals, mesh, input_output_aliases):
    """The same for mpmd_map, whose kernels see whole arrays (invars:
    [inputs, outputs, scratch]), each in the memory space the fallback
    lowering gives it: an array's own TPU memory space, else the mesh's
    default."""
    from jax._src import core as jax_core

    def space(aval):
        own = getattr(aval, "memory_space", None)
        if isinstance(aval, jax_core.ShapedArray) and not isinstance(own, jax_core.MemorySpace):
            return own
        return mesh.default_memory_space

    n_in = len(in_avals)
    return [(i, n_in + o) for i, o in input_output_aliases.items()
            if _whole_array_in_hbm(space(in_avals[i])) and _whole_array_in_hbm(space(out_avals[o]))]


def rules(lost: list):
    """Lowering rules that run Pallas kernels in interpret form. `lost`
    receives, for each kernel interpreted, the number of its aliases whose
    input writes interpret form still drops (neither whole nor in HBM)."""
    from jax._src.pallas import mpmd
    from jax._src.pallas import pallas_call as pc

    def pallas_call_rule(ctx, *args, interpret=False, jaxpr, grid_mapping, input_output_aliases,
                         **kw):
        pairs = _pallas_call_pairs(grid_mapping, input_output_aliases)
        lost.append(len(input_output_aliases) - len(pairs))
        return pc._pallas_call_lowering(
            ctx, *args, interpret=interpret or True, jaxpr=_one_buffer(jaxpr, pairs),
            grid_mapping=grid_mapping, input_output_aliases=input_output_aliases, **kw)

    def mpmd_map_rule(ctx, *args, interpret=False, jaxprs, meshes, out_avals,
                      input_output_aliases, **kw):
        # The fallback lowering builds a pallas_call lowering with the
        # kernel's own, non-interpret setting: interpret is forced here. It
        # takes one kernel and one mesh (and refuses more itself).
        pairs = _mpmd_map_pairs(ctx.avals_in, out_avals, meshes[0], input_output_aliases)
        lost.append(len(input_output_aliases) - len(pairs))
        return mpmd._mpmd_map_fallback_lowering(
            ctx, *args, interpret=interpret or True,
            jaxprs=tuple(_one_buffer(j, pairs) for j in jaxprs), meshes=meshes,
            out_avals=out_avals, input_output_aliases=input_output_aliases, **kw)

    return ((pc.pallas_call_p, pallas_call_rule), (mpmd.mpmd_map_p, mpmd_map_rule))
