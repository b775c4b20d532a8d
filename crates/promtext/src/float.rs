//! Number formatting in the styles the common client libraries use.
//!
//! Servers differ in how they print the same float, and dashboards or golden files notice:
//! Python's `prometheus_client` (which vLLM uses) prints `1.0`, `4.97` and
//! `1.7960098059464908e+09`; Go's `expfmt` prints `1`, `4.97` and `1.7960098059464908e+09`;
//! the DCGM exporter prints integers bare and other values with six decimals.

use std::fmt::Write;

/// How to print sample values and `le`/`quantile` label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FloatStyle {
    /// Python `prometheus_client`'s `floatToGoString`: `repr()` with Go-style exponents from
    /// 1e6 on (`1.0`, `1200.0`, `1e+06`, `1e-05`).
    #[default]
    Python,
    /// Go's `strconv.FormatFloat(v, 'g', -1, 64)`, as `expfmt` writes (`1`, `1e+06`, `1e-05`).
    Go,
    /// The DCGM exporter: integers without a decimal point, other values with six decimals.
    Dcgm,
}

/// The shortest decimal digits that round-trip `v` (finite, non-zero), and the power of ten
/// of the first digit: `v = 0.d1d2… × 10^(exp + 1)`, i.e. `d1.d2… × 10^exp`.
fn shortest(v: f64) -> (String, i32) {
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

/// Writes `d1.d2d3…e±XX` with at least two exponent digits.
fn push_exponent_form(out: &mut String, digits: &str, exp: i32) {
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    let sign = if exp < 0 { '-' } else { '+' };
    let _ = write!(out, "e{sign}{:02}", exp.abs());
}

/// Writes the digits in positional notation; `min_frac` forces `.0` for integral values.
fn push_fixed_form(out: &mut String, digits: &str, exp: i32, min_frac: bool) {
    let n = digits.len() as i32;
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(digits);
    } else if exp + 1 >= n {
        out.push_str(digits);
        for _ in 0..(exp + 1 - n) {
            out.push('0');
        }
        if min_frac {
            out.push_str(".0");
        }
    } else {
        let split = (exp + 1) as usize;
        out.push_str(&digits[..split]);
        out.push('.');
        out.push_str(&digits[split..]);
    }
}

/// Appends `v` to `out` in the given style.
pub fn write_float(out: &mut String, v: f64, style: FloatStyle) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
        return;
    }
    if style == FloatStyle::Dcgm {
        if v.fract() == 0.0 && v.abs() < 1e18 {
            let _ = write!(out, "{}", v as i64);
        } else {
            let _ = write!(out, "{v:.6}");
        }
        return;
    }
    if v == 0.0 {
        out.push_str(match (style, v.is_sign_negative()) {
            (FloatStyle::Go, false) => "0",
            (FloatStyle::Go, true) => "-0",
            (_, false) => "0.0",
            (_, true) => "-0.0",
        });
        return;
    }
    if v < 0.0 {
        out.push('-');
    }
    let (digits, exp) = shortest(v);
    match style {
        FloatStyle::Go => {
            if !(-4..6).contains(&exp) {
                push_exponent_form(out, &digits, exp);
            } else {
                push_fixed_form(out, &digits, exp, false);
            }
        }
        FloatStyle::Python | FloatStyle::Dcgm => {
            // Python's repr switches to exponent form below 1e-4 and from 1e16; prometheus_client
            // then rewrites positive values from 1e6 up into Go's exponent form.
            let go_exponent = v > 0.0 && (6..16).contains(&exp);
            if !(-4..16).contains(&exp) || go_exponent {
                let trimmed = digits.trim_end_matches('0');
                let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
                push_exponent_form(out, trimmed, exp);
            } else {
                push_fixed_form(out, &digits, exp, true);
            }
        }
    }
}

/// `v` as a string in the given style.
///
/// ```
/// use inferscale_promtext::{format_float, FloatStyle};
/// assert_eq!(format_float(1.0, FloatStyle::Python), "1.0");
/// assert_eq!(format_float(1796009805.9464908, FloatStyle::Python), "1.7960098059464908e+09");
/// assert_eq!(format_float(1.0, FloatStyle::Go), "1");
/// assert_eq!(format_float(8.969, FloatStyle::Dcgm), "8.969000");
/// ```
pub fn format_float(v: f64, style: FloatStyle) -> String {
    let mut s = String::new();
    write_float(&mut s, v, style);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_style_matches_prometheus_client() {
        let cases = [
            (1.0, "1.0"),
            (0.0, "0.0"),
            (1200.0, "1200.0"),
            (4.97, "4.97"),
            (0.3, "0.3"),
            (10.0, "10.0"),
            (7680.0, "7680.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (999999.0, "999999.0"),
            (1e6, "1e+06"),
            (1.5e6, "1.5e+06"),
            (3.98856192e9, "3.98856192e+09"),
            (1.7960098059464908e9, "1.7960098059464908e+09"),
            (1e16, "1e+16"),
            (1.5e17, "1.5e+17"),
            (-2.5e6, "-2500000.0"),
            (-1e-7, "-1e-07"),
            (0.013300656000000001, "0.013300656000000001"),
        ];
        for (v, want) in cases {
            assert_eq!(format_float(v, FloatStyle::Python), want, "{v}");
        }
    }

    #[test]
    fn go_style_matches_strconv() {
        let cases = [
            (1.0, "1"),
            (0.0, "0"),
            (4.97, "4.97"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (-3.5, "-3.5"),
        ];
        for (v, want) in cases {
            assert_eq!(format_float(v, FloatStyle::Go), want, "{v}");
        }
    }

    #[test]
    fn specials() {
        for style in [FloatStyle::Python, FloatStyle::Go, FloatStyle::Dcgm] {
            assert_eq!(format_float(f64::NAN, style), "NaN");
            assert_eq!(format_float(f64::INFINITY, style), "+Inf");
            assert_eq!(format_float(f64::NEG_INFINITY, style), "-Inf");
        }
        assert_eq!(format_float(36.0, FloatStyle::Dcgm), "36");
    }

    #[test]
    fn every_style_round_trips() {
        let mut x = 0.123_456_789_f64;
        for _ in 0..2000 {
            for style in [FloatStyle::Python, FloatStyle::Go] {
                for v in [x, -x, x * 1e-9, x * 1e12, x.round()] {
                    let s = format_float(v, style);
                    assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
                }
            }
            x = x * 1.618_033_988 + 0.7;
            if x > 1e300 {
                x = 0.3;
            }
        }
    }
}
