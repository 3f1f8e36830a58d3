//! The sampler's dense products, C ← α·A·B (+ C), through the `gemm` crate.
//!
//! Why not `faer::linalg::matmul::matmul`, which the rest of the crate uses: on x86-64 faer
//! hands every product above a few thousand multiply–adds to its own kernel, which reserves
//! on each calling thread a packing buffer of 2 × the L3 size it reads off
//! `/sys/devices/system/cpu` (that size divided by the cores sharing the cache, then multiplied
//! by the physical core count). On a machine whose `/sys` reports many cores or an unshared
//! cache this is 1 GB of address space per thread, whatever the product's size (a
//! d = 4000, 4-neuron run aborted on "memory allocation of 1006632960 bytes" under a 3 GiB
//! `ulimit -v` on one machine and passed on another of the same kind). The `gemm` crate packs
//! into buffers sized by the product (at most `k_c · n` entries, `k_c` ≤ 512) and keeps one
//! L2-sized slab per thread, so what a run reserves follows its own sizes; [`crate::limits`]
//! counts both ([`workspace_bytes_per_thread`], [`packing_bytes`]).

use faer::{Accum, MatMut, MatRef, Par};

use crate::sim::num::real::Real;

/// C ← α·A·B (`Accum::Replace`) or C ← C + α·A·B (`Accum::Add`), with faer's argument order;
/// any strides. `par` is honoured (`Par::Seq` runs on the calling thread).
///
/// # Panics
/// When the shapes do not match (C m × n, A m × k, B k × n).
pub fn matmul<T: Real>(
    dst: MatMut<'_, T>,
    accum: Accum,
    lhs: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    alpha: T,
    par: Par,
) {
    let (m, n, k) = (dst.nrows(), dst.ncols(), lhs.ncols());
    assert!(
        lhs.nrows() == m && rhs.nrows() == k && rhs.ncols() == n,
        "matmul: C is {m} × {n}, A {} × {}, B {} × {}",
        lhs.nrows(),
        lhs.ncols(),
        rhs.nrows(),
        rhs.ncols()
    );
    if m == 0 || n == 0 {
        return;
    }
    let parallelism = match par {
        Par::Seq => gemm::Parallelism::None,
        Par::Rayon(threads) => gemm::Parallelism::Rayon(threads.get()),
    };
    let (dst_rs, dst_cs) = (dst.row_stride(), dst.col_stride());
    // SAFETY: the shapes were checked above, and every pointer/stride pair comes from a faer
    // view that owns or borrows exactly those m × k, k × n and m × n entries; `dst` is a
    // unique borrow, so it aliases neither input. `gemm` reads C only when `read_dst`. `T` is
    // f32 or f64 (the only `Real`s), both of which `gemm` supports.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_ptr_mut(),
            dst_cs,
            dst_rs,
            matches!(accum, Accum::Add),
            lhs.as_ptr(),
            lhs.col_stride(),
            lhs.row_stride(),
            rhs.as_ptr(),
            rhs.col_stride(),
            rhs.row_stride(),
            T::one(),
            alpha,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Upper bound of the packing buffers one product of an m × k by a k × n matrix allocates
/// (`gemm-common`'s `gemm_basic_generic`: the packed right-hand side, `k_c` × n rounded up to
/// the register block, and the pre-packed left-hand side, `k_c` × m, `k_c` = min(k, 512);
/// either side may be the packed one after the transposition it applies), in bytes.
pub fn packing_bytes(m: usize, n: usize, k: usize, float_bytes: usize) -> f64 {
    let kc = k.min(512) as f64;
    // Register blocks are at most 48 wide (f32, AVX-512 in gemm-common's tables); rounding up
    // both sides by that keeps the bound above either layout.
    let round = |x: usize| x.div_ceil(48) as f64 * 48.0;
    kc * (round(m) + round(n)) * float_bytes as f64 + 2.0 * 128.0
}

/// A bound of the slab `gemm-common` keeps on every thread that has run a product: one L2
/// cache as it reads `/sys` (the size of one `index*` of level 2 divided by the CPUs sharing
/// it; unlike faer's kernel it is not multiplied by a core count). 32 MiB is 16× the largest
/// L2 of current x86 server cores; a test checks it against what `gemm-common` reads on the
/// machine it runs on.
pub fn workspace_bytes_per_thread() -> f64 {
    32.0 * 1024.0 * 1024.0
}

/// What faer's x86 product kernel (`private-gemm-x86` 0.1, `gemm`) reserves on every thread
/// that calls it, from the `/sys` cache description it reads: 2 × L3, with L3 = (size of the
/// level-3 cache ÷ CPUs in its `shared_cpu_list`) × CPUs sharing an L1 × physical cores. Kept
/// to document why the sampler does not use it (module doc): on a machine with an unshared
/// 32 MiB L3 and 15 physical cores it came to 960 MiB per thread.
pub fn faer_kernel_reservation(
    l3_bytes: usize,
    l3_shared_cpus: usize,
    l1_shared_cpus: usize,
    physical_cores: usize,
) -> usize {
    2 * (l3_bytes / l3_shared_cpus.max(1)) * l1_shared_cpus * physical_cores
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    fn naive(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
        Mat::from_fn(a.nrows(), b.ncols(), |i, j| {
            (0..a.ncols()).map(|l| a[(i, l)] * b[(l, j)]).sum()
        })
    }

    #[test]
    fn products_match_the_naive_sum_for_every_layout_and_accumulation() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut draw =
            |r: usize, c: usize| Mat::<f64>::from_fn(r, c, |_, _| StandardNormal.sample(&mut rng));
        for &(m, n, k) in &[
            (1, 1, 1),
            (7, 5, 3),
            (33, 65, 129),
            (200, 12, 700),
            (3, 300, 40),
        ] {
            let a = draw(m, k);
            let b = draw(k, n);
            let at = draw(k, m); // used transposed
            let c0 = draw(m, n);
            let exact = naive(a.as_ref(), b.as_ref());
            let mut c = c0.clone();
            matmul(
                c.as_mut(),
                Accum::Replace,
                a.as_ref(),
                b.as_ref(),
                2.0,
                Par::Seq,
            );
            let mut c_add = c0.clone();
            matmul(
                c_add.as_mut(),
                Accum::Add,
                a.as_ref(),
                b.as_ref(),
                0.5,
                Par::rayon(2),
            );
            let exact_t = naive(at.transpose(), b.as_ref());
            let mut c_t = c0.clone();
            matmul(
                c_t.as_mut(),
                Accum::Replace,
                at.transpose(),
                b.as_ref(),
                1.0,
                Par::Seq,
            );
            for i in 0..m {
                for j in 0..n {
                    let tol = 1e-12 * (k as f64);
                    assert!((c[(i, j)] - 2.0 * exact[(i, j)]).abs() < tol, "{m}×{n}×{k}");
                    let want = c0[(i, j)] + 0.5 * exact[(i, j)];
                    assert!((c_add[(i, j)] - want).abs() < tol, "{m}×{n}×{k} add");
                    assert!(
                        (c_t[(i, j)] - exact_t[(i, j)]).abs() < tol,
                        "{m}×{n}×{k} Aᵀ"
                    );
                }
            }
        }
    }

    #[test]
    fn the_failing_machines_cache_description_gives_its_one_gigabyte_reservation() {
        // "memory allocation of 1006632960 bytes failed" on a machine with a 32 MiB
        // L3 listed as unshared and 15 physical cores; this machine kind (L3 shared by 2, 2
        // cores) reserves 64 MiB.
        assert_eq!(faer_kernel_reservation(32 << 20, 1, 1, 15), 1_006_632_960);
        assert_eq!(faer_kernel_reservation(32 << 20, 2, 1, 2), 64 << 20);
        // The product used instead packs in proportion to its sizes: the d = 4000 run's
        // first-layer product (8 rows, 4000 deep, 4 units × 64 chains) packs well under 1 MB.
        assert!(packing_bytes(8, 256, 4000, 4) < 1e6);
    }

    #[test]
    fn the_per_thread_slab_bound_covers_what_gemm_common_reads_here() {
        let l2 = gemm_common::cache::CACHE_INFO[1].cache_bytes as f64;
        assert!(workspace_bytes_per_thread() >= l2, "{l2}");
    }

    /// The sampler reserves only what [`crate::sim::memory::sample`] counts: no module under
    /// sim/ may call faer's product or its dense eigensolver (module doc).
    #[test]
    fn the_sampler_calls_neither_faers_product_nor_its_dense_eigensolver() {
        fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    visit(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let code: String = text
                        .lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .take_while(|l| !l.starts_with("mod tests"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    for banned in ["faer::linalg::matmul", "sym_eigen", "self_adjoint_evd"] {
                        if code.contains(banned) {
                            found.push(format!("{} uses {banned}", path.display()));
                        }
                    }
                }
            }
        }
        let sim = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sim");
        let mut found = Vec::new();
        visit(&sim, &mut found);
        // The GEMM-peak benchmark measures faer's own kernel on purpose.
        found.retain(|f| !f.contains("bench"));
        assert!(found.is_empty(), "{found:#?}");
    }

    #[test]
    fn single_precision_products_match_within_rounding() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
        let (m, n, k) = (40, 24, 500);
        let a = Mat::<f32>::from_fn(m, k, |_, _| StandardNormal.sample(&mut rng));
        let b = Mat::<f32>::from_fn(k, n, |_, _| StandardNormal.sample(&mut rng));
        let mut c = Mat::<f32>::zeros(m, n);
        matmul(
            c.as_mut(),
            Accum::Replace,
            a.as_ref(),
            b.as_ref(),
            1.0,
            Par::Seq,
        );
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k).map(|l| a[(i, l)] as f64 * b[(l, j)] as f64).sum();
                assert!((c[(i, j)] as f64 - exact).abs() < 1e-3, "{i},{j}");
            }
        }
    }
}
