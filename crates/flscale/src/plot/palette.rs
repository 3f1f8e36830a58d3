//! The colours of flscale's figures: [`PALETTE`] for series, [`REGION_PALETTE`] for the regions
//! of a phase map; both stay distinct for readers with the common colour-vision deficiencies.

use plotters::style::RGBColor;

/// The palette shared by all flscale figures: Okabe & Ito's eight colours ("Color Universal
/// Design", 2008), which stay distinct under the common colour-vision deficiencies, ordered so
/// that neighbouring series differ most (blue, vermillion, bluish green, orange, reddish
/// purple, sky blue, yellow, black).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(230, 159, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// Fill colours for the regions of a map (the winners of `flscale predict --phase N1,N2`):
/// the seven Okabe–Ito hues of [`PALETTE`] (black left out: it would hide the region's
/// letter), then fourteen more chosen greedily from a 16-level RGB grid to stay as far as
/// possible from those already taken, in CIELAB, under normal vision and simulated
/// protanopia, deuteranopia and tritanopia (Machado, Oliveira & Fernandes 2009, severity 1).
/// Every pair of the 21 differs by ΔE ≥ 15 in all four (the test `region_colours_stay_apart`
/// recomputes it).
pub const REGION_PALETTE: [RGBColor; 21] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(230, 159, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(136, 0, 255),
    RGBColor(102, 51, 17),
    RGBColor(187, 238, 153),
    RGBColor(51, 68, 68),
    RGBColor(0, 255, 221),
    RGBColor(187, 85, 255),
    RGBColor(68, 34, 187),
    RGBColor(136, 0, 119),
    RGBColor(170, 170, 85),
    RGBColor(170, 85, 68),
    RGBColor(136, 238, 102),
    RGBColor(136, 85, 119),
    RGBColor(221, 170, 170),
    RGBColor(85, 34, 153),
];

/// The fill colour of region `k` of a map: [`REGION_PALETTE`], repeating after 21 regions
/// (the letters drawn in the regions still tell them apart).
pub fn region_colour(k: usize) -> RGBColor {
    REGION_PALETTE[k % REGION_PALETTE.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Colour-vision simulation (Machado, Oliveira & Fernandes 2009, severity 1) of an sRGB
    /// colour, as CIELAB (D65).
    fn lab_seen(c: RGBColor, m: &[[f64; 3]; 3]) -> [f64; 3] {
        let lin = |v: u8| {
            let v = v as f64 / 255.0;
            if v <= 0.04045 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        let l = [lin(c.0), lin(c.1), lin(c.2)];
        let s: Vec<f64> = (0..3)
            .map(|i| (0..3).map(|j| m[i][j] * l[j]).sum::<f64>().clamp(0.0, 1.0))
            .collect();
        let x = 0.4124 * s[0] + 0.3576 * s[1] + 0.1805 * s[2];
        let y = 0.2126 * s[0] + 0.7152 * s[1] + 0.0722 * s[2];
        let z = 0.0193 * s[0] + 0.1192 * s[1] + 0.9505 * s[2];
        let f = |t: f64| {
            if t > 0.008856 {
                t.cbrt()
            } else {
                7.787 * t + 16.0 / 116.0
            }
        };
        let (fx, fy, fz) = (f(x / 0.95047), f(y), f(z / 1.08883));
        [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
    }

    /// Issue 40: the phase map drew GFL-GFL and GP-GP in the same blue (the palette repeated
    /// after eight regions, and its blues were close). Every pair of region colours must stay
    /// apart (ΔE ≥ 15) for normal vision and the three dichromacies.
    #[test]
    fn region_colours_stay_apart() {
        const VISION: [(&str, [[f64; 3]; 3]); 4] = [
            (
                "normal",
                [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            ),
            (
                "protanopia",
                [
                    [0.152286, 1.052583, -0.204868],
                    [0.114503, 0.786281, 0.099216],
                    [-0.003882, -0.048116, 1.051998],
                ],
            ),
            (
                "deuteranopia",
                [
                    [0.367322, 0.860646, -0.227968],
                    [0.280085, 0.672501, 0.047413],
                    [-0.011820, 0.042940, 0.968881],
                ],
            ),
            (
                "tritanopia",
                [
                    [1.255528, -0.076749, -0.178779],
                    [-0.078411, 0.930809, 0.147602],
                    [0.004733, 0.691367, 0.303900],
                ],
            ),
        ];
        for (name, m) in VISION {
            for i in 0..REGION_PALETTE.len() {
                for j in 0..i {
                    let (a, b) = (
                        lab_seen(region_colour(i), &m),
                        lab_seen(region_colour(j), &m),
                    );
                    let de =
                        ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2))
                            .sqrt();
                    assert!(
                        de >= 15.0,
                        "{name}: regions {i} and {j} differ by ΔE {de:.1}"
                    );
                }
            }
        }
    }
}
