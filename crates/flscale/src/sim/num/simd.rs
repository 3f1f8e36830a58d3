//! Run-time SIMD dispatch for the samplers' hot loops (spec 02, "Performance bar": portable
//! binaries, SIMD chosen at run time rather than with `-C target-cpu=native`).
//!
//! [`vectorized`] runs a closure inside a function compiled for AVX-512 or AVX2 + FMA when the
//! CPU has them (else as is). The closure and everything it calls that is `#[inline(always)]`
//! is compiled into that function, so its loops use the wide registers — the same technique as
//! `pulp`'s `Arch::dispatch` (used by faer), without a trait per kernel. Callees that are not
//! inlined keep the baseline instruction set.
//!
//! Reproducibility: Rust does not contract `a * b + c` into a fused multiply–add and LLVM does
//! not reorder floating-point sums without fast-math flags, so every build performs the same
//! operations in the same order and gives bit-identical numbers; only explicit `mul_add`
//! calls would differ, and the kernels dispatched here use none.

/// The instruction sets the dispatch tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F (every CPU with it also has FMA).
    Avx512,
    /// AVX2 and FMA.
    Avx2Fma,
    /// The build's baseline (SSE2 on x86_64).
    Baseline,
}

/// The widest instruction set of this CPU that the dispatch uses.
#[inline(always)]
pub fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Isa::Avx2Fma;
        }
    }
    Isa::Baseline
}

/// Runs `f` in the widest vector build this CPU supports (module doc). Mark the closure and
/// the functions it calls `#[inline(always)]` for the dispatch to reach their loops.
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    match isa() {
        // SAFETY: the CPU supports AVX-512F (checked by `isa`; it implies FMA support in
        // every CPU that has it, and the function enables nothing else).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { run_avx512(f) },
        // SAFETY: the CPU supports AVX2 and FMA (checked by `isa`), all that the function
        // enables.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { run_avx2(f) },
        _ => f(),
    }
}

/// [`vectorized`] when `wide`, else `f` in the baseline build: for code whose callers know
/// whether the vector build pays (the engine asks the model, `Model::VECTOR_BUILD`).
#[inline(always)]
pub fn vectorized_if<R>(wide: bool, f: impl FnOnce() -> R) -> R {
    if wide {
        vectorized(f)
    } else {
        f()
    }
}

/// Runs `fused(args)` in the vector build when the CPU has one, else `unfused(args)` (the
/// mutable buffers go through `args`, so that both closures may write them): for loops written
/// with explicit fused multiply–adds (`mul_add`), which are one instruction in the vector
/// builds but a library call in the baseline one ([`super::f32math`]). The two closures give
/// different roundings, so their results depend on the CPU (unlike [`vectorized`]'s).
#[inline(always)]
pub fn vectorized_fma<A, R>(
    args: A,
    fused: impl FnOnce(A) -> R,
    unfused: impl FnOnce(A) -> R,
) -> R {
    match isa() {
        Isa::Baseline => unfused(args),
        // `fused` must be inlined into the target-feature function: compiled outside it, its
        // `mul_add`s are calls to the library's software fmaf (attention's softmax ran 5×
        // slower that way, BENCHMARKS.md "One engine"). Its callers mark it likewise.
        _ => vectorized(
            #[inline(always)]
            || fused(args),
        ),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn run_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::vectorized;

    /// A reduction and an axpy give the same bits in the vector build and the baseline one.
    #[test]
    fn the_vector_build_gives_the_baseline_numbers() {
        let x: Vec<f64> = (0..1001)
            .map(|i| ((i * 37 % 101) as f64).sin() * 1e3)
            .collect();
        let y: Vec<f64> = (0..1001).map(|i| ((i * 13 % 97) as f64).cos()).collect();
        let body = |x: &[f64], y: &[f64]| {
            let mut acc = [0.0f64; 8];
            for (cx, cy) in x.chunks_exact(8).zip(y.chunks_exact(8)) {
                for j in 0..8 {
                    acc[j] += cx[j] * cy[j];
                }
            }
            let mut z = y.to_vec();
            for (zi, xi) in z.iter_mut().zip(x) {
                *zi += 0.3 * xi;
            }
            (acc.iter().sum::<f64>(), z)
        };
        let wide = vectorized(
            #[inline(always)]
            || body(&x, &y),
        );
        let plain = body(&x, &y);
        assert_eq!(wide.0.to_bits(), plain.0.to_bits());
        assert!(wide
            .1
            .iter()
            .zip(&plain.1)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
