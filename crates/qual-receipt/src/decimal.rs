//! Exact decimal arithmetic for metric tolerances.
//!
//! The original evaluates tolerances with Python's `decimal` module at a precision chosen large
//! enough that addition, subtraction and one multiplication of the operands are exact. This
//! module is that exact arithmetic, with no precision limit: a [`Decimal`] is a sign, a base-10
//! coefficient and an exponent, and `+`, `-`, `*` never round.
//!
//! Invariants: the coefficient has no leading zeros (zero is the single digit `0`); a float
//! enters as the decimal value of Python's `repr` (its shortest round-trip text), an integer as
//! its exact digits; the string form is Python's `str(Decimal)` (scientific notation exactly
//! when the exponent is positive or the adjusted exponent is below -6).

use qual_json::{Int, Number, Value};
use std::cmp::Ordering;
use std::fmt;

/// An exact decimal number `(-1)^neg × coefficient × 10^exp`.
#[derive(Clone, Debug)]
pub struct Decimal {
    neg: bool,
    /// Big-endian base-10 digits, no leading zeros, at least one digit.
    digits: Vec<u8>,
    exp: i64,
}

fn trim(mut d: Vec<u8>) -> Vec<u8> {
    let first = d
        .iter()
        .position(|&x| x != 0)
        .unwrap_or(d.len().saturating_sub(1));
    d.drain(..first);
    if d.is_empty() {
        d.push(0);
    }
    d
}

fn cmp_mag(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn add_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let (mut i, mut j, mut carry) = (a.len(), b.len(), 0u8);
    while i > 0 || j > 0 || carry > 0 {
        let x = if i > 0 {
            i -= 1;
            a[i]
        } else {
            0
        };
        let y = if j > 0 {
            j -= 1;
            b[j]
        } else {
            0
        };
        let s = x + y + carry;
        out.push(s % 10);
        carry = s / 10;
    }
    out.reverse();
    trim(out)
}

/// `a - b` for `a >= b`.
fn sub_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let (mut i, mut j, mut borrow) = (a.len(), b.len(), 0i8);
    while i > 0 {
        i -= 1;
        let y = if j > 0 {
            j -= 1;
            b[j] as i8
        } else {
            0
        };
        let mut d = a[i] as i8 - y - borrow;
        borrow = 0;
        if d < 0 {
            d += 10;
            borrow = 1;
        }
        out.push(d as u8);
    }
    out.reverse();
    trim(out)
}

fn mul_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut acc = vec![0u32; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate().rev() {
        for (j, &y) in b.iter().enumerate().rev() {
            acc[i + j + 1] += u32::from(x) * u32::from(y);
        }
    }
    for k in (1..acc.len()).rev() {
        let carry = acc[k] / 10;
        acc[k] %= 10;
        acc[k - 1] += carry;
    }
    trim(acc.into_iter().map(|d| d as u8).collect())
}

impl Decimal {
    /// Zero with exponent 0.
    pub fn zero() -> Decimal {
        Decimal {
            neg: false,
            digits: vec![0],
            exp: 0,
        }
    }

    fn is_zero(&self) -> bool {
        self.digits == [0]
    }

    /// Parses decimal text such as `-12.5e-3` (Python `Decimal(str)` for finite numbers).
    pub fn parse(text: &str) -> Option<Decimal> {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (mantissa, exp_part) = match rest.find(['e', 'E']) {
            Some(p) => (&rest[..p], Some(&rest[p + 1..])),
            None => (rest, None),
        };
        let mut exp: i64 = match exp_part {
            Some(e) => e.parse().ok()?,
            None => 0,
        };
        let (int_part, frac_part) = match mantissa.find('.') {
            Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
            None => (mantissa, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let mut digits = Vec::with_capacity(int_part.len() + frac_part.len());
        for c in int_part.bytes().chain(frac_part.bytes()) {
            if !c.is_ascii_digit() {
                return None;
            }
            digits.push(c - b'0');
        }
        exp -= frac_part.len() as i64;
        let digits = trim(digits);
        Some(Decimal {
            neg: neg && digits != [0],
            digits,
            exp,
        })
    }

    /// The exact value of an integer.
    pub fn from_int(i: &Int) -> Decimal {
        Decimal::parse(&i.to_string()).unwrap_or_else(Decimal::zero)
    }

    /// `Decimal(str(f))`: the value of Python's shortest `repr` of a finite float.
    pub fn from_f64(f: f64) -> Decimal {
        Decimal::parse(&qual_json::python_float_repr(f)).unwrap_or_else(Decimal::zero)
    }

    /// `Decimal(str(v))` for a JSON number (bools and non-numbers give `None`).
    pub fn from_value(v: &Value) -> Option<Decimal> {
        match v {
            Value::Number(Number::Int(i)) => Some(Decimal::from_int(i)),
            Value::Number(Number::Float(f)) => Some(Decimal::from_f64(*f)),
            _ => None,
        }
    }

    /// Absolute value.
    pub fn abs(&self) -> Decimal {
        Decimal {
            neg: false,
            ..self.clone()
        }
    }

    fn negate(&self) -> Decimal {
        Decimal {
            neg: !self.neg && !self.is_zero(),
            ..self.clone()
        }
    }

    fn scaled_to(&self, exp: i64) -> Vec<u8> {
        let mut d = self.digits.clone();
        d.extend(std::iter::repeat_n(0u8, (self.exp - exp) as usize));
        d
    }

    /// Exact sum (exponent = the smaller of the two).
    pub fn add(&self, other: &Decimal) -> Decimal {
        let exp = self.exp.min(other.exp);
        let a = self.scaled_to(exp);
        let b = other.scaled_to(exp);
        let (neg, digits) = if self.neg == other.neg {
            (self.neg, add_mag(&a, &b))
        } else {
            match cmp_mag(&trim(a.clone()), &trim(b.clone())) {
                Ordering::Less => (other.neg, sub_mag(&trim(b), &trim(a))),
                _ => (self.neg, sub_mag(&trim(a), &trim(b))),
            }
        };
        let is_zero = digits == [0];
        Decimal {
            neg: neg && !is_zero,
            digits,
            exp,
        }
    }

    /// Exact difference.
    pub fn sub(&self, other: &Decimal) -> Decimal {
        self.add(&other.negate())
    }

    /// Exact product.
    pub fn mul(&self, other: &Decimal) -> Decimal {
        let digits = mul_mag(&self.digits, &other.digits);
        let is_zero = digits == [0];
        Decimal {
            neg: self.neg != other.neg && !is_zero,
            digits,
            exp: self.exp + other.exp,
        }
    }

    /// Numeric comparison.
    pub fn cmp_value(&self, other: &Decimal) -> Ordering {
        let diff = self.sub(other);
        if diff.is_zero() {
            Ordering::Equal
        } else if diff.neg {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    }

    /// The nearest `f64` (may be infinite for huge values).
    pub fn to_f64(&self) -> f64 {
        self.to_string().parse().unwrap_or(f64::NAN)
    }
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Decimal) -> bool {
        self.cmp_value(other) == Ordering::Equal
    }
}

impl fmt::Display for Decimal {
    /// Python's `str(Decimal)` (to-scientific-string).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let coeff: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.neg { "-" } else { "" };
        let adjusted = self.exp + coeff.len() as i64 - 1;
        if self.exp <= 0 && adjusted >= -6 {
            if self.exp == 0 {
                return write!(f, "{sign}{coeff}");
            }
            let point = coeff.len() as i64 + self.exp;
            if point > 0 {
                let (a, b) = coeff.split_at(point as usize);
                write!(f, "{sign}{a}.{b}")
            } else {
                let zeros = "0".repeat((-point) as usize);
                write!(f, "{sign}0.{zeros}{coeff}")
            }
        } else {
            let (first, rest) = coeff.split_at(1);
            let mantissa = if rest.is_empty() {
                first.to_owned()
            } else {
                format!("{first}.{rest}")
            };
            let esign = if adjusted >= 0 { "+" } else { "-" };
            write!(f, "{sign}{mantissa}E{esign}{}", adjusted.abs())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn arithmetic_is_exact() {
        assert_eq!(d("0.1").add(&d("0.2")).to_string(), "0.3");
        assert_eq!(d("10").sub(&d("9.5")).to_string(), "0.5");
        assert_eq!(d("1.5").mul(&d("-2")).to_string(), "-3.0");
        let big = Decimal::from_int(&Int::from_parts(false, &format!("1{}", "0".repeat(100))));
        let smaller = big.sub(&d("2"));
        assert_eq!(big.sub(&smaller).to_string(), "2");
        assert_eq!(d("1e-100").mul(&big).cmp_value(&d("1")), Ordering::Equal);
    }

    #[test]
    fn string_form_matches_python() {
        assert_eq!(d("1e-7").to_string(), "1E-7");
        assert_eq!(d("1e-6").to_string(), "0.000001");
        assert_eq!(d("1e2").to_string(), "1E+2");
        assert_eq!(d("123.4500").to_string(), "123.4500");
        assert_eq!(d("-0").to_string(), "0");
        assert_eq!(Decimal::from_f64(0.1).to_string(), "0.1");
        assert_eq!(Decimal::from_f64(1e308).to_string(), "1E+308");
    }

    #[test]
    fn comparisons_cross_exponents() {
        assert_eq!(d("1.0").cmp_value(&d("1")), Ordering::Equal);
        assert_eq!(d("-2").cmp_value(&d("1")), Ordering::Less);
        assert_eq!(d("1e400").cmp_value(&d("-1e400")), Ordering::Greater);
        assert!(d("1e308").sub(&d("-1.1e308")).to_f64().is_infinite());
    }
}
