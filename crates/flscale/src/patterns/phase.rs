//! Phase diagrams: the winning pattern as a function of one or two regime exponents, with
//! exact boundaries (spec 01 §1 "Phase diagram"; e.g. lazy learning wins for N ≫ d^(2m−1)).
//!
//! Along one axis ν = log_d X, every pattern's optimal exponent is piecewise affine in ν, and
//! so is the winners' exponent E(ν) = min_p V_p(ν). Between two sample points whose winners
//! differ, the boundary is where the two winning affine pieces cross; that point is computed
//! exactly in rationals and verified by evaluating the engine there (bisection takes over if
//! the verification fails, so every reported boundary is an evaluated point).
//! Over two axes the map is sampled on a grid, and the boundary between two neighbouring
//! winners is reported as the exact monomial equation where their optimal energies are equal.

use std::collections::BTreeSet;

use num_traits::{Signed, Zero};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::arch::Architecture;
use super::predict::Prediction;
use crate::error::{Error, Result};
use crate::plot::{perr, region_colour, Figure, LineChart, Mark, Series};
use crate::scaling::energy::BASE;
use crate::scaling::{fmt_q, Monomial, Regime, Q};

/// Affine function a·ν + b of one regime exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Affine {
    /// Slope.
    pub a: Q,
    /// Intercept.
    pub b: Q,
}

impl Affine {
    fn at(&self, v: Q) -> Q {
        self.a * v + self.b
    }
}

/// One interval of a 1-D phase diagram.
#[derive(Debug, Clone)]
pub struct Region {
    /// Lower end of ν.
    pub from: Q,
    /// Upper end of ν.
    pub to: Q,
    /// The winners inside the interval.
    pub winners: Vec<String>,
    /// The winners' optimal energy as a monomial in the scales.
    pub energy: String,
    /// P\* exponent of d inside the interval: a·ν + b.
    pub p_star: Affine,
}

/// A 1-D phase diagram along the exponent of one scale.
#[derive(Debug, Clone)]
pub struct PhaseLine {
    /// The scale on the axis.
    pub axis: String,
    /// Regions in increasing ν, boundaries shared.
    pub regions: Vec<Region>,
    /// Boundaries between regions.
    pub boundaries: Vec<Boundary>,
}

/// A point where the winners or the form of the optimum change.
#[derive(Debug, Clone)]
pub struct Boundary {
    /// ν at the boundary.
    pub at: Q,
    /// Whether the engine was evaluated exactly there (always, unless refinement gave up).
    pub exact: bool,
    /// Patterns tied at the boundary (the winners there).
    pub tied: Vec<String>,
    /// True when different patterns win on the two sides; false when the same patterns win
    /// but their optimum changes form (a constraint starts or stops binding).
    pub winners_change: bool,
}

fn winners_piece(
    pred: &Prediction,
    regime: &Regime,
    axis: &str,
) -> Option<(Vec<String>, Affine, String)> {
    let w = pred.winners.first()?;
    let min = pred.pattern(w)?.minimum.as_ref()?;
    let sym = &min.energy_symbolic;
    let a = sym.exponent(axis);
    let mut b = Q::zero();
    for (s, e) in sym.iter() {
        if s == axis {
            continue;
        }
        b += e * if s == BASE {
            Q::from_integer(1)
        } else {
            regime.get(s).unwrap_or_else(Q::zero)
        };
    }
    let mut names = pred.winners.clone();
    names.sort();
    Some((names, Affine { a, b }, sym.to_string()))
}

fn with_axis(base: &Regime, axis: &str, v: Q) -> Regime {
    let mut r = base.clone();
    r.set(axis, v);
    r
}

/// Computes the 1-D phase diagram of `arch` along `axis` ∈ [lo, hi], other scales from `base`.
pub fn phase_line(
    arch: &Architecture,
    base: &Regime,
    axis: &str,
    lo: Q,
    hi: Q,
) -> Result<PhaseLine> {
    if axis == BASE {
        return Err(Error::invalid(
            "--phase cannot use d as an axis: every exponent is measured in powers of d",
        ));
    }
    if lo >= hi {
        return Err(Error::invalid(format!(
            "--range {}:{} is empty; give LO:HI with LO < HI",
            fmt_q(&lo),
            fmt_q(&hi)
        )));
    }
    let eval = |v: Q| -> Result<(Vec<String>, Affine, String)> {
        let r = with_axis(base, axis, v);
        let p = arch.predict_in(&r)?;
        Ok(winners_piece(&p, &r, axis).unwrap_or((
            Vec::new(),
            Affine {
                a: Q::zero(),
                b: Q::zero(),
            },
            "infinite".into(),
        )))
    };
    let steps = 48i64;
    let grid: Vec<Q> = (0..=steps)
        .map(|i| lo + (hi - lo) * Q::new(i, steps))
        .collect();
    let mut samples: Vec<Sample> = Vec::new();
    for &v in &grid {
        samples.push((v, eval(v)?));
    }
    // Refine every interval whose ends differ until each change is pinned to an exact point.
    let mut points: Vec<Sample> = Vec::new();
    for w in samples.windows(2) {
        points.push(w[0].clone());
        refine(&eval, &w[0], &w[1], 0, &mut points)?;
    }
    if let Some(last) = samples.last() {
        points.push(last.clone());
    }
    points.sort_by_key(|p| p.0);
    points.dedup_by(|a, b| a.0 == b.0);
    Ok(assemble(axis, points, hi))
}

/// Groups sample points into regions of one (winners, affine piece) and turns isolated points
/// between two different regions into boundaries.
fn assemble(axis: &str, points: Vec<Sample>, hi: Q) -> PhaseLine {
    struct Group {
        from: Q,
        to: Q,
        names: Vec<String>,
        piece: Affine,
        energy: String,
    }
    let mut groups: Vec<Group> = Vec::new();
    for (v, (names, piece, energy)) in points {
        match groups.last_mut() {
            Some(g) if g.names == names && g.piece == piece => g.to = v,
            _ => groups.push(Group {
                from: v,
                to: v,
                names,
                piece,
                energy,
            }),
        }
    }
    let mut regions: Vec<Region> = Vec::new();
    let mut boundaries: Vec<Boundary> = Vec::new();
    let n = groups.len();
    for (i, g) in groups.iter().enumerate() {
        let isolated = g.from == g.to && i > 0 && i + 1 < n;
        if isolated {
            let (l, r) = (&groups[i - 1], &groups[i + 1]);
            boundaries.push(Boundary {
                at: g.from,
                exact: true,
                tied: g.names.clone(),
                winners_change: l.names != r.names,
            });
            if let Some(last) = regions.last_mut() {
                last.to = g.from;
            }
            continue;
        }
        let from = match (regions.last_mut(), boundaries.last()) {
            (Some(last), Some(b)) if b.at >= last.to => b.at,
            (Some(last), _) => {
                // No isolated transition point: if the two pieces meet at one of the two
                // evaluated ends, that end is the exact boundary; otherwise the change lies
                // between two samples and the midpoint is reported as inexact.
                let meets = |v: Q| last.p_star.at(v) == g.piece.at(v);
                let (at, exact) = if meets(g.from) {
                    (g.from, true)
                } else if meets(last.to) {
                    (last.to, true)
                } else {
                    ((last.to + g.from) / Q::from_integer(2), false)
                };
                let mut tied = last.winners.clone();
                for n in &g.names {
                    if !tied.contains(n) {
                        tied.push(n.clone());
                    }
                }
                boundaries.push(Boundary {
                    at,
                    exact,
                    tied,
                    winners_change: last.winners != g.names,
                });
                last.to = at;
                at
            }
            (None, _) => g.from,
        };
        regions.push(Region {
            from,
            to: g.to,
            winners: g.names.clone(),
            energy: g.energy.clone(),
            p_star: g.piece,
        });
    }
    if let Some(r) = regions.last_mut() {
        r.to = hi;
    }
    PhaseLine {
        axis: axis.to_string(),
        regions,
        boundaries,
    }
}

type Sample = (Q, (Vec<String>, Affine, String));

fn refine(
    eval: &dyn Fn(Q) -> Result<(Vec<String>, Affine, String)>,
    left: &Sample,
    right: &Sample,
    depth: usize,
    out: &mut Vec<Sample>,
) -> Result<()> {
    let (l, (ln, lp, _)) = left;
    let (r, (rn, rp, _)) = right;
    if ln == rn && lp == rp {
        return Ok(());
    }
    if depth > 24 {
        return Ok(());
    }
    // Candidate: where the two affine pieces cross.
    let cross = if lp.a != rp.a {
        Some((rp.b - lp.b) / (lp.a - rp.a))
    } else {
        None
    };
    if let Some(c) = cross.filter(|c| c > l && c < r) {
        let mid = (c, eval(c)?);
        let exact = mid.1 .1.at(c) == lp.at(c) && lp.at(c) == rp.at(c);
        if exact {
            // Both sides of c must continue the pieces: check just inside each half.
            out.push(mid.clone());
            refine(eval, left, &mid, depth + 1, out)?;
            refine(eval, &mid, right, depth + 1, out)?;
            return Ok(());
        }
    }
    let m = (*l + *r) / Q::from_integer(2);
    let mid = (m, eval(m)?);
    out.push(mid.clone());
    refine(eval, left, &mid, depth + 1, out)?;
    refine(eval, &mid, right, depth + 1, out)
}

/// A 2-D phase map over the exponents of two scales.
#[derive(Debug, Clone)]
pub struct PhaseMap {
    /// The two scales (x, y).
    pub axes: (String, String),
    /// Grid coordinates (ν_x values, ν_y values).
    pub grid: (Vec<Q>, Vec<Q>),
    /// Winner-set index per cell, `cells[iy][ix]`; `None` where nothing can align.
    pub cells: Vec<Vec<Option<usize>>>,
    /// The distinct winner sets, indexed by `cells`.
    pub winner_sets: Vec<Vec<String>>,
    /// The P\* exponent per cell.
    pub p_star: Vec<Vec<Option<Q>>>,
    /// Exact boundary equations between neighbouring winners, e.g. "Sp-Mag | GP-Sp: N1^2 = N2*d".
    pub boundaries: Vec<String>,
}

fn equality(a: &Monomial, b: &Monomial) -> Option<String> {
    let r = a.div(b);
    if r.is_one() {
        return None;
    }
    let l = r
        .iter()
        .fold(1i64, |l, (_, e)| num_integer::Integer::lcm(&l, e.denom()));
    let r = r.pow(Q::from_integer(l));
    let num = r
        .iter()
        .filter(|(_, e)| e.is_positive())
        .fold(Monomial::one(), |x, (s, e)| x.mul(&Monomial::power(s, e)));
    let den = r
        .iter()
        .filter(|(_, e)| e.is_negative())
        .fold(Monomial::one(), |x, (s, e)| x.mul(&Monomial::power(s, -e)));
    Some(format!("{num} = {den}"))
}

/// Computes a 2-D phase map on an n×n grid over [lo, hi]².
pub fn phase_map(
    arch: &Architecture,
    base: &Regime,
    axes: (&str, &str),
    lo: Q,
    hi: Q,
    n: usize,
) -> Result<PhaseMap> {
    phase_map_until(arch, base, axes, lo, hi, n, &|| false)
}

/// [`phase_map`] that asks `stop` before each of its n² predictions and gives up with a
/// runtime error when it answers true (a server's deadline, or a client that went away).
pub fn phase_map_until(
    arch: &Architecture,
    base: &Regime,
    axes: (&str, &str),
    lo: Q,
    hi: Q,
    n: usize,
    stop: &dyn Fn() -> bool,
) -> Result<PhaseMap> {
    if axes.0 == BASE || axes.1 == BASE || axes.0 == axes.1 {
        return Err(Error::invalid(format!(
            "--phase {},{} needs two different scales other than d",
            axes.0, axes.1
        )));
    }
    if lo >= hi {
        return Err(Error::invalid(format!(
            "--range {}:{} is empty; give LO:HI with LO < HI",
            fmt_q(&lo),
            fmt_q(&hi)
        )));
    }
    let n = n.clamp(2, 200);
    let coords: Vec<Q> = (0..n)
        .map(|i| lo + (hi - lo) * Q::new(i as i64, n as i64 - 1))
        .collect();
    let mut winner_sets: Vec<Vec<String>> = Vec::new();
    let mut cells = vec![vec![None; n]; n];
    let mut p_star = vec![vec![None; n]; n];
    let mut energies: Vec<Vec<Option<Monomial>>> = vec![vec![None; n]; n];
    for (iy, &vy) in coords.iter().enumerate() {
        for (ix, &vx) in coords.iter().enumerate() {
            if stop() {
                return Err(Error::runtime(format!(
                    "the phase map was stopped after {} of its {} cells",
                    iy * n + ix,
                    n * n
                )));
            }
            let mut r = base.clone();
            r.set(axes.0, vx);
            r.set(axes.1, vy);
            let p = arch.predict_in(&r)?;
            // Cells are labelled by the simplest winners (the full tie lists are long: they
            // are in the 1-D output and in `predict --json` at any point).
            let mut names: Vec<String> = p
                .simplest_winners()
                .iter()
                .map(|x| x.name.clone())
                .collect();
            names.sort();
            if names.is_empty() {
                continue;
            }
            let idx = match winner_sets.iter().position(|w| *w == names) {
                Some(i) => i,
                None => {
                    winner_sets.push(names.clone());
                    winner_sets.len() - 1
                }
            };
            cells[iy][ix] = Some(idx);
            p_star[iy][ix] = p.p_star_exponent;
            energies[iy][ix] = p
                .pattern(&names[0])
                .and_then(|x| x.minimum.as_ref())
                .map(|m| m.energy_symbolic.clone());
        }
    }
    let boundaries = boundary_equations(base, axes, &coords, &cells, &energies, &winner_sets);
    Ok(PhaseMap {
        axes: (axes.0.to_string(), axes.1.to_string()),
        grid: (coords.clone(), coords),
        cells,
        winner_sets,
        p_star,
        boundaries: boundaries.into_iter().collect(),
    })
}

/// The equations of the boundaries between neighbouring cells of different winners: where
/// the two winners' energies are equal, kept only where that line passes between the cells.
fn boundary_equations(
    base: &Regime,
    axes: (&str, &str),
    coords: &[Q],
    cells: &[Vec<Option<usize>>],
    energies: &[Vec<Option<Monomial>>],
    winner_sets: &[Vec<String>],
) -> BTreeSet<String> {
    let n = coords.len();
    let mut boundaries = BTreeSet::new();
    for iy in 0..n {
        for ix in 0..n {
            for (jy, jx) in [(iy, ix + 1), (iy + 1, ix)] {
                if jy >= n || jx >= n {
                    continue;
                }
                if let (Some(a), Some(b)) = (cells[iy][ix], cells[jy][jx]) {
                    if a != b {
                        if let (Some(ea), Some(eb)) = (&energies[iy][ix], &energies[jy][jx]) {
                            // Keep the equation only if the line passes between the two cells.
                            let gap = |x: usize, y: usize| {
                                let mut r = base.clone();
                                r.set(axes.0, coords[x]);
                                r.set(axes.1, coords[y]);
                                exponent_in(ea, &r) - exponent_in(eb, &r)
                            };
                            let (g0, g1) = (gap(ix, iy), gap(jx, jy));
                            if g0 * g1 > Q::zero() {
                                continue;
                            }
                            if let Some(eq) = equality(ea, eb) {
                                let (x, y) = if a < b { (a, b) } else { (b, a) };
                                boundaries.insert(format!(
                                    "{} | {}: {}",
                                    winner_sets[x].join(" = "),
                                    winner_sets[y].join(" = "),
                                    eq
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    boundaries
}

fn exponent_in(m: &Monomial, r: &Regime) -> Q {
    m.iter()
        .map(|(s, e)| {
            e * if s == BASE {
                Q::from_integer(1)
            } else {
                r.get(s).unwrap_or_else(Q::zero)
            }
        })
        .fold(Q::zero(), |a, b| a + b)
}

fn qf(q: &Q) -> f64 {
    *q.numer() as f64 / *q.denom() as f64
}

/// The 1-D diagram as a chart: P\* exponent against ν, one colour per winner set.
pub fn line_chart(line: &PhaseLine, title: &str) -> LineChart {
    let mut series = Vec::new();
    for r in &line.regions {
        let pts = vec![
            (qf(&r.from), qf(&r.p_star.at(r.from))),
            (qf(&r.to), qf(&r.p_star.at(r.to))),
        ];
        let label = format!("{} ({})", r.winners.join(" = "), r.energy);
        if let Some(s) = series.iter_mut().find(|s: &&mut Series| s.label == label) {
            s.points.extend(pts);
        } else {
            series.push(Series::new(label, pts, Mark::LinePoints));
        }
    }
    LineChart {
        title: title.to_string(),
        x_label: format!("log_d {}", line.axis),
        y_label: "P*/kappa exponent of d".to_string(),
        log_x: false,
        log_y: false,
        series,
        notes: line
            .boundaries
            .iter()
            .map(|b| {
                let what = if b.winners_change {
                    "winner changes"
                } else {
                    "optimum changes form"
                };
                format!("{} = {}: {what}", line.axis, Monomial::power(BASE, b.at))
            })
            .collect(),
    }
}

/// The 2-D map as a figure.
pub struct MapFigure<'a> {
    /// The map.
    pub map: &'a PhaseMap,
    /// Title.
    pub title: String,
}

impl Figure for MapFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let m = self.map;
        let (xs, ys) = &m.grid;
        let (x0, x1) = (qf(&xs[0]), qf(&xs[xs.len() - 1]));
        let (y0, y1) = (qf(&ys[0]), qf(&ys[ys.len() - 1]));
        let hx = (x1 - x0) / (xs.len() as f64 - 1.0) / 2.0;
        let hy = (y1 - y0) / (ys.len() as f64 - 1.0) / 2.0;
        let (main, legend) = root.split_horizontally((root.dim_in_pixel().0 as f64 * 0.68) as u32);
        let mut chart = ChartBuilder::on(&main)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d((x0 - hx)..(x1 + hx), (y0 - hy)..(y1 + hy))
            .map_err(perr)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(format!("log_d {}", m.axes.0))
            .y_desc(format!("log_d {}", m.axes.1))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(perr)?;
        let mut rects = Vec::new();
        for (iy, row) in m.cells.iter().enumerate() {
            for (ix, c) in row.iter().enumerate() {
                let color = match c {
                    Some(k) => region_colour(*k).filled(),
                    None => RGBColor(220, 220, 220).filled(),
                };
                let (cx, cy) = (qf(&xs[ix]), qf(&ys[iy]));
                rects.push(Rectangle::new(
                    [(cx - hx, cy - hy), (cx + hx, cy + hy)],
                    color,
                ));
            }
        }
        chart.draw_series(rects).map_err(perr)?;
        // Each region's letter (the text map's), at the region's cell nearest its centre: the
        // letters tell regions apart where colours alone would not (print, colour vision).
        for (k, _) in m.winner_sets.iter().enumerate() {
            let Some((cx, cy)) = region_label_cell(m, k) else {
                continue;
            };
            let ink = if is_dark(region_colour(k)) {
                WHITE
            } else {
                BLACK
            };
            let style = ("sans-serif", 14)
                .into_font()
                .color(&ink)
                .pos(Pos::new(HPos::Center, VPos::Center));
            chart
                .draw_series(std::iter::once(Text::new(
                    region_letter(k).to_string(),
                    (qf(&xs[cx]), qf(&ys[cy])),
                    style,
                )))
                .map_err(perr)?;
        }
        let style = ("sans-serif", 13).into_font().color(&BLACK);
        legend
            .draw(&Text::new(
                "winner",
                (10, 40),
                ("sans-serif", 15).into_font().color(&BLACK),
            ))
            .map_err(perr)?;
        for (k, names) in m.winner_sets.iter().enumerate() {
            let y = 64 + 22 * k as i32;
            legend
                .draw(&Rectangle::new(
                    [(10, y - 7), (26, y + 7)],
                    region_colour(k).filled(),
                ))
                .map_err(perr)?;
            legend
                .draw(&Text::new(
                    format!("{} = {}", region_letter(k), names.join(" = ")),
                    (32, y - 7),
                    style.clone(),
                ))
                .map_err(perr)?;
        }
        Ok(())
    }
}

/// The letter of winner set `k` in the text map and the figure (A, B, …, Z, then again).
pub fn region_letter(k: usize) -> char {
    (b'A' + (k % 26) as u8) as char
}

/// Whether black text would be hard to read on `c` (relative luminance below 0.25).
fn is_dark(c: RGBColor) -> bool {
    let lin = |v: u8| {
        let v = v as f64 / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(c.0) + 0.7152 * lin(c.1) + 0.0722 * lin(c.2) < 0.25
}

/// The cell (column, row) of winner set `k` nearest the mean position of its cells.
fn region_label_cell(m: &PhaseMap, k: usize) -> Option<(usize, usize)> {
    let cells: Vec<(usize, usize)> = m
        .cells
        .iter()
        .enumerate()
        .flat_map(|(iy, row)| {
            row.iter()
                .enumerate()
                .filter(move |(_, c)| **c == Some(k))
                .map(move |(ix, _)| (ix, iy))
        })
        .collect();
    let n = cells.len() as f64;
    let mx = cells.iter().map(|c| c.0 as f64).sum::<f64>() / n;
    let my = cells.iter().map(|c| c.1 as f64).sum::<f64>() / n;
    cells.into_iter().min_by(|a, b| {
        let d = |c: &(usize, usize)| (c.0 as f64 - mx).powi(2) + (c.1 as f64 - my).powi(2);
        d(a).total_cmp(&d(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_boundary_of_two_layer_he3_is_d5() {
        // App. E.1.1: for m = 3 lazy learning wins once N ≫ d^(2m−1) = d^5.
        let arch = Architecture::from_preset("fcn2-erf-he3").unwrap();
        let line = phase_line(
            &arch,
            &arch.regime,
            "N",
            Q::from_integer(0),
            Q::from_integer(8),
        )
        .unwrap();
        let last = line.regions.last().unwrap();
        assert_eq!(last.winners, vec!["GP".to_string()]);
        assert_eq!(last.from, Q::from_integer(5));
        let b5 = line
            .boundaries
            .iter()
            .find(|b| b.at == Q::from_integer(5))
            .unwrap();
        assert!(
            b5.exact
                && b5.winners_change
                && b5.tied.contains(&"GP".to_string())
                && b5.tied.contains(&"Sp".to_string())
        );
        // N = d^(1/3): GFL hands over to specialization (GFL = (Nd)^(3/4) = d exactly there).
        let b13 = line
            .boundaries
            .iter()
            .find(|b| b.at == Q::new(1, 3))
            .unwrap();
        assert!(b13.winners_change && b13.tied.contains(&"GFL".to_string()));
        // N = d: specialization keeps winning, but 1 <= M stops binding (a kink, not a phase change).
        let b1 = line
            .boundaries
            .iter()
            .find(|b| b.at == Q::from_integer(1))
            .unwrap();
        assert!(!b1.winners_change);
        assert!(line.boundaries.iter().all(|b| b.exact));
        // Below d^5 specialization wins, with P* = sqrt(N d): slope 1/2 in ν.
        let sp = line
            .regions
            .iter()
            .find(|r| r.winners.contains(&"Sp".to_string()) && r.from >= Q::from_integer(1))
            .unwrap();
        assert_eq!(sp.p_star.a, Q::new(1, 2));
    }

    #[test]
    fn three_layer_map_has_table_1_boundaries() {
        let arch = Architecture::from_preset("fcn3-erf-he3").unwrap();
        let map = phase_map(
            &arch,
            &arch.regime,
            ("N1", "N2"),
            Q::from_integer(0),
            Q::from_integer(7),
            15,
        )
        .unwrap();
        let all: Vec<String> = map.winner_sets.iter().flatten().cloned().collect();
        assert!(all.contains(&"GP-GP".to_string()), "{:?}", map.winner_sets);
        assert!(all.contains(&"GP-Sp".to_string()));
        assert!(!map.boundaries.is_empty());
    }

    /// On the default map of `predict --preset fcn3-erf-he3 --phase N1,N2` every winner set
    /// (GFL-GFL and GP-GP among them) gets its own colour and letter.
    #[test]
    fn no_two_phases_of_the_default_map_share_a_colour() {
        let arch = Architecture::from_preset("fcn3-erf-he3").unwrap();
        let map = phase_map(
            &arch,
            &arch.regime,
            ("N1", "N2"),
            Q::from_integer(0),
            Q::from_integer(6),
            25,
        )
        .unwrap();
        let n = map.winner_sets.len();
        assert!(
            n >= 2 && n <= crate::plot::REGION_PALETTE.len(),
            "{n} winner sets"
        );
        let colours: BTreeSet<(u8, u8, u8)> = (0..n)
            .map(|k| {
                let c = region_colour(k);
                (c.0, c.1, c.2)
            })
            .collect();
        assert_eq!(colours.len(), n);
        let letters: BTreeSet<char> = (0..n).map(region_letter).collect();
        assert_eq!(letters.len(), n);
        for k in 0..n {
            assert!(
                region_label_cell(&map, k).is_some(),
                "{:?}",
                map.winner_sets[k]
            );
        }
    }
}
