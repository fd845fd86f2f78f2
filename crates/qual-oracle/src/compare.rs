//! The full-vocabulary logit comparison.
//!
//! Owns the definitions (restated in `docs/oracles.md`), computed per position over the whole
//! vocabulary with `f64` accumulation:
//!
//! - **argmax**: IEEE 754 total order (`f32::total_cmp`, so `-0.0 < +0.0`), ties → the lowest
//!   index; **top-k**: sorted descending by the same order, ties by ascending index;
//!   `top_k_overlap` = |reference top-k ∩ candidate top-k|.
//! - `max_abs_error` = max |r − c|, `mean_abs_error` = Σ|r − c| / vocab.
//! - `cosine` = Σ r·c / (‖r‖·‖c‖) (refused as undefined when a norm is zero).
//! - `kl_divergence` = KL(softmax(r) ‖ softmax(c)) in nats, computed stably as
//!   Σ p_r (r − c) − (m_r + ln Z_r) + (m_c + ln Z_c) with m the row maximum and
//!   Z = Σ exp(x − m); a rounding residue below zero is reported as 0.
//! - `reference_argmax_rank`: the 1-based rank of the reference argmax token in the candidate
//!   under the same total order and tie rule (1 + the number of candidate entries ranked above
//!   it), so rank 1 ⇔ the candidate's argmax is the reference's.
//! - `reference_margin`: reference top-1 − top-2 logit (a near-tie is weaker evidence).
//!
//! A non-finite value anywhere, a shape mismatch or a token-id mismatch is an error with the
//! position and index; nothing is compared past it. The kernel makes two passes over each pair
//! of rows: one for the sums, argmax and top-k, one for the softmax sums and the rank.

use crate::tensor::Logits;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Default `k` of the top-k overlap.
pub const DEFAULT_TOP_K: usize = 10;

/// Which tensor a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The reference.
    Reference,
    /// The candidate.
    Candidate,
}

/// Why two tensors could not be compared.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum CompareError {
    /// Different numbers of positions or vocabulary sizes.
    #[error("compare logits: shape mismatch: reference {reference:?}, candidate {candidate:?} ([positions, vocab])")]
    Shape {
        /// Reference `[positions, vocab]`.
        reference: [usize; 2],
        /// Candidate `[positions, vocab]`.
        candidate: [usize; 2],
    },
    /// The two tensors were produced for different input token ids.
    #[error("compare logits: token-id mismatch: {detail}")]
    TokenIds {
        /// Where they differ.
        detail: String,
    },
    /// A value is NaN or infinite.
    #[error(
        "compare logits: non-finite {side:?} value {value} at position {position}, index {index}"
    )]
    NonFinite {
        /// Which tensor.
        side: Side,
        /// Row.
        position: usize,
        /// Column (token id).
        index: usize,
        /// The value as text (`NaN`, `inf`, `-inf`).
        value: String,
    },
    /// A row is all zeros, so the cosine is undefined.
    #[error(
        "compare logits: cosine undefined at position {position}: the {side:?} row has zero norm"
    )]
    ZeroNorm {
        /// Which tensor.
        side: Side,
        /// Row.
        position: usize,
    },
    /// `k` is zero or larger than the vocabulary.
    #[error("compare logits: top-k {k} is outside 1..={vocab}")]
    TopK {
        /// Requested k.
        k: usize,
        /// Vocabulary size.
        vocab: usize,
    },
}

/// One token of a top-k list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopToken {
    /// Token id.
    pub token_id: u32,
    /// Its logit.
    pub logit: f32,
}

/// The metrics of one position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PositionMetrics {
    /// Row index.
    pub position: usize,
    /// Reference argmax token.
    pub reference_argmax: u32,
    /// Candidate argmax token.
    pub candidate_argmax: u32,
    /// |reference top-k ∩ candidate top-k|.
    pub top_k_overlap: usize,
    /// max |r − c|.
    pub max_abs_error: f64,
    /// Σ|r − c| / vocab.
    pub mean_abs_error: f64,
    /// Cosine similarity.
    pub cosine: f64,
    /// KL(softmax(r) ‖ softmax(c)), nats.
    pub kl_divergence: f64,
    /// 1-based rank of the reference argmax in the candidate.
    pub reference_argmax_rank: u64,
    /// Reference top-1 − top-2 logit (0 for a one-token vocabulary).
    pub reference_margin: f64,
    /// Reference top-k.
    pub reference_top: Vec<TopToken>,
    /// Candidate top-k.
    pub candidate_top: Vec<TopToken>,
}

impl PositionMetrics {
    /// Whether both argmaxes agree.
    pub fn argmax_equal(&self) -> bool {
        self.reference_argmax == self.candidate_argmax
    }
}

/// Sortable integer key of an `f32` under IEEE total order (the mapping `total_cmp` uses).
#[inline(always)]
pub fn total_key(x: f32) -> i32 {
    let b = x.to_bits() as i32;
    b ^ (((b >> 31) as u32) >> 1) as i32
}

/// The top-k of a row: sorted descending by total order, ties by ascending index.
///
/// Blocks of 16 values are first tested against the current k-th key in one branch-free
/// pass; only a block holding a value above it is walked one by one.
#[inline(always)]
pub fn top_k(row: &[f32], k: usize) -> Vec<TopToken> {
    const BLOCK: usize = 16;
    let k = k.min(row.len());
    let mut keys: Vec<(i32, u32)> = Vec::with_capacity(k + 1);
    let mut thresh = i32::MIN;
    let insert = |j: usize, key: i32, keys: &mut Vec<(i32, u32)>, thresh: &mut i32| {
        if keys.len() < k || key > *thresh {
            // After every entry whose key is >= key: equal keys keep ascending indexes.
            let at = keys.partition_point(|&(kk, _)| kk >= key);
            keys.insert(at, (key, j as u32));
            if keys.len() > k {
                keys.pop();
            }
            if keys.len() == k {
                *thresh = keys[k - 1].0;
            }
        }
    };
    let mut base = 0;
    for block in row.chunks(BLOCK) {
        let full = keys.len() == k;
        // `>=` on the values is a superset of `>` on the keys for finite values (they differ
        // only for -0.0 and +0.0), and it vectorises.
        let t = if full {
            row[keys[k - 1].1 as usize]
        } else {
            f32::NEG_INFINITY
        };
        let mut any = false;
        for &x in block {
            any |= x >= t;
        }
        if any || !full {
            for (o, &x) in block.iter().enumerate() {
                insert(base + o, total_key(x), &mut keys, &mut thresh);
            }
        }
        base += block.len();
    }
    keys.into_iter()
        .map(|(_, j)| TopToken {
            token_id: j,
            logit: row[j as usize],
        })
        .collect()
}

const LANES: usize = 4;

struct Sums {
    sum_abs: f64,
    max_abs: f64,
    dot: f64,
    rr: f64,
    cc: f64,
}

/// Pass 1: the f64 sums, in `LANES` independent accumulators so the loop vectorises.
#[inline(always)]
fn sums(r: &[f32], c: &[f32]) -> Sums {
    let mut sa = [0f64; LANES];
    let mut ma = [0f64; LANES];
    let mut d = [0f64; LANES];
    let mut rr = [0f64; LANES];
    let mut cc = [0f64; LANES];
    let rc = r.chunks_exact(LANES);
    let cch = c.chunks_exact(LANES);
    let (rt, ct) = (rc.remainder(), cch.remainder());
    for (a, b) in rc.zip(cch) {
        let x: [f64; LANES] = std::array::from_fn(|l| a[l] as f64);
        let y: [f64; LANES] = std::array::from_fn(|l| b[l] as f64);
        for l in 0..LANES {
            let e = (x[l] - y[l]).abs();
            sa[l] += e;
            ma[l] = if e > ma[l] { e } else { ma[l] };
            d[l] += x[l] * y[l];
            rr[l] += x[l] * x[l];
            cc[l] += y[l] * y[l];
        }
    }
    for (l, (&a, &b)) in rt.iter().zip(ct).enumerate() {
        let (x, y) = (a as f64, b as f64);
        let e = (x - y).abs();
        sa[l] += e;
        ma[l] = ma[l].max(e);
        d[l] += x * y;
        rr[l] += x * x;
        cc[l] += y * y;
    }
    Sums {
        sum_abs: sa.iter().sum(),
        max_abs: ma.iter().fold(0.0, |m, &v| if v > m { v } else { m }),
        dot: d.iter().sum(),
        rr: rr.iter().sum(),
        cc: cc.iter().sum(),
    }
}

/// 2^(j/64) for j in 0..64, each the correctly rounded `f64` (generated once and checked
/// against 60-digit decimal arithmetic).
const EXP2_TABLE: [f64; 64] = [
    f64::from_bits(0x3ff0000000000000),
    f64::from_bits(0x3ff02c9a3e778061),
    f64::from_bits(0x3ff059b0d3158574),
    f64::from_bits(0x3ff0874518759bc8),
    f64::from_bits(0x3ff0b5586cf9890f),
    f64::from_bits(0x3ff0e3ec32d3d1a2),
    f64::from_bits(0x3ff11301d0125b51),
    f64::from_bits(0x3ff1429aaea92de0),
    f64::from_bits(0x3ff172b83c7d517b),
    f64::from_bits(0x3ff1a35beb6fcb75),
    f64::from_bits(0x3ff1d4873168b9aa),
    f64::from_bits(0x3ff2063b88628cd6),
    f64::from_bits(0x3ff2387a6e756238),
    f64::from_bits(0x3ff26b4565e27cdd),
    f64::from_bits(0x3ff29e9df51fdee1),
    f64::from_bits(0x3ff2d285a6e4030b),
    f64::from_bits(0x3ff306fe0a31b715),
    f64::from_bits(0x3ff33c08b26416ff),
    f64::from_bits(0x3ff371a7373aa9cb),
    f64::from_bits(0x3ff3a7db34e59ff7),
    f64::from_bits(0x3ff3dea64c123422),
    f64::from_bits(0x3ff4160a21f72e2a),
    f64::from_bits(0x3ff44e086061892d),
    f64::from_bits(0x3ff486a2b5c13cd0),
    f64::from_bits(0x3ff4bfdad5362a27),
    f64::from_bits(0x3ff4f9b2769d2ca7),
    f64::from_bits(0x3ff5342b569d4f82),
    f64::from_bits(0x3ff56f4736b527da),
    f64::from_bits(0x3ff5ab07dd485429),
    f64::from_bits(0x3ff5e76f15ad2148),
    f64::from_bits(0x3ff6247eb03a5585),
    f64::from_bits(0x3ff6623882552225),
    f64::from_bits(0x3ff6a09e667f3bcd),
    f64::from_bits(0x3ff6dfb23c651a2f),
    f64::from_bits(0x3ff71f75e8ec5f74),
    f64::from_bits(0x3ff75feb564267c9),
    f64::from_bits(0x3ff7a11473eb0187),
    f64::from_bits(0x3ff7e2f336cf4e62),
    f64::from_bits(0x3ff82589994cce13),
    f64::from_bits(0x3ff868d99b4492ed),
    f64::from_bits(0x3ff8ace5422aa0db),
    f64::from_bits(0x3ff8f1ae99157736),
    f64::from_bits(0x3ff93737b0cdc5e5),
    f64::from_bits(0x3ff97d829fde4e50),
    f64::from_bits(0x3ff9c49182a3f090),
    f64::from_bits(0x3ffa0c667b5de565),
    f64::from_bits(0x3ffa5503b23e255d),
    f64::from_bits(0x3ffa9e6b5579fdbf),
    f64::from_bits(0x3ffae89f995ad3ad),
    f64::from_bits(0x3ffb33a2b84f15fb),
    f64::from_bits(0x3ffb7f76f2fb5e47),
    f64::from_bits(0x3ffbcc1e904bc1d2),
    f64::from_bits(0x3ffc199bdd85529c),
    f64::from_bits(0x3ffc67f12e57d14b),
    f64::from_bits(0x3ffcb720dcef9069),
    f64::from_bits(0x3ffd072d4a07897c),
    f64::from_bits(0x3ffd5818dcfba487),
    f64::from_bits(0x3ffda9e603db3285),
    f64::from_bits(0x3ffdfc97337b9b5f),
    f64::from_bits(0x3ffe502ee78b3ff6),
    f64::from_bits(0x3ffea4afa2a490da),
    f64::from_bits(0x3ffefa1bee615a27),
    f64::from_bits(0x3fff50765b6e4540),
    f64::from_bits(0x3fffa7c1819e90d8),
];

/// `exp(x)` for `x <= 0`, branch-free so the softmax loop vectorises. Below −708 it returns
/// 0: such a term is under 1e-307 while every softmax sum it joins is at least 1 (the row
/// maximum contributes exp(0)), far below one unit in the last place. Reduction
/// x = (m/64)·ln2 + t with |t| ≤ ln2/128 (m rounded to nearest with the 1.5·2^52 trick, whose
/// low bits are m itself), exp(x) = 2^(m div 64) · 2^((m mod 64)/64) · e^t with the middle
/// factor from [`EXP2_TABLE`] and e^t a degree-5 Taylor polynomial (truncation below 4e-17);
/// relative error below 5e-16 (checked against `f64::exp` in tests). No fused multiply-add
/// is used, so the result is the same whatever vector width runs it.
#[inline(always)]
fn exp_nonpos(x: f64) -> f64 {
    const LN2_64_HI: f64 = 0.693_147_180_369_123_8 / 64.0; // fdlibm ln2_hi: 32 trailing zero bits
    const LN2_64_LO: f64 = 1.908_214_929_270_587_7e-10 / 64.0;
    const INV_LN2_64: f64 = std::f64::consts::LOG2_E * 64.0;
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    const FLOOR: f64 = -708.0;
    const BIAS: i64 = 64 * 1100;
    let tiny = x < FLOOR;
    let x = if tiny { FLOOR } else { x };
    let kf = x * INV_LN2_64 + SHIFT;
    let m = (kf.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let n = kf - SHIFT;
    let t = (x - n * LN2_64_HI) - n * LN2_64_LO;
    let mut p = 1.0 / 120.0;
    p = p * t + 1.0 / 24.0;
    p = p * t + 1.0 / 6.0;
    p = p * t + 0.5;
    p = p * t + 1.0;
    p = p * t + 1.0;
    let j = (m & 63) as usize;
    // m + BIAS >= 0 on the clamped range, so a logical shift is a floor division by 64.
    let e = (((m + BIAS) as u64) >> 6) as i64 - 1100;
    let scale = f64::from_bits(((e + 1023) as u64) << 52);
    let v = p * (EXP2_TABLE[j] * scale);
    if tiny {
        0.0
    } else {
        v
    }
}

struct Softmax {
    z_r: f64,
    z_c: f64,
    s: f64,
}

/// Pass 2: Σ exp(r − m_r), Σ exp(c − m_c), Σ exp(r − m_r)(r − c).
#[inline(always)]
fn softmax_sums(r: &[f32], c: &[f32], m_r: f64, m_c: f64) -> Softmax {
    let mut zr = [0f64; LANES];
    let mut zc = [0f64; LANES];
    let mut s = [0f64; LANES];
    let rc = r.chunks_exact(LANES);
    let cch = c.chunks_exact(LANES);
    let (rt, ct) = (rc.remainder(), cch.remainder());
    for (a, b) in rc.zip(cch) {
        let x: [f64; LANES] = std::array::from_fn(|l| a[l] as f64);
        let y: [f64; LANES] = std::array::from_fn(|l| b[l] as f64);
        for l in 0..LANES {
            let er = exp_nonpos(x[l] - m_r);
            zr[l] += er;
            zc[l] += exp_nonpos(y[l] - m_c);
            s[l] += er * (x[l] - y[l]);
        }
    }
    for (l, (&a, &b)) in rt.iter().zip(ct).enumerate() {
        let (x, y) = (a as f64, b as f64);
        let er = exp_nonpos(x - m_r);
        zr[l] += er;
        zc[l] += exp_nonpos(y - m_c);
        s[l] += er * (x - y);
    }
    Softmax {
        z_r: zr.iter().sum(),
        z_c: zc.iter().sum(),
        s: s.iter().sum(),
    }
}

/// 1 + the number of entries of `row` ranked above index `t` (total order, ties → lower
/// index first).
#[inline(always)]
pub fn rank_of(row: &[f32], t: usize) -> u64 {
    let kt = total_key(row[t]);
    let before: u64 = row[..t].iter().map(|&x| (total_key(x) >= kt) as u64).sum();
    let after: u64 = row[t..].iter().map(|&x| (total_key(x) > kt) as u64).sum();
    1 + before + after
}

fn first_non_finite(row: &[f32]) -> Option<(usize, f32)> {
    row.iter()
        .enumerate()
        .find(|(_, x)| !x.is_finite())
        .map(|(i, &x)| (i, x))
}

/// Compares one pair of rows (`position` is only used in errors and the result).
///
/// On x86-64 CPUs with AVX2 the same code is compiled a second time with AVX2 enabled and
/// chosen at run time; it computes bit-identical results (fixed 4-lane accumulation order,
/// no fused multiply-add), only faster.
pub fn compare_rows(
    position: usize,
    r: &[f32],
    c: &[f32],
    k: usize,
) -> Result<PositionMetrics, CompareError> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { compare_rows_avx2(position, r, c, k) };
        }
    }
    compare_rows_impl(position, r, c, k)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn compare_rows_avx2(
    position: usize,
    r: &[f32],
    c: &[f32],
    k: usize,
) -> Result<PositionMetrics, CompareError> {
    compare_rows_impl(position, r, c, k)
}

#[inline(always)]
fn compare_rows_impl(
    position: usize,
    r: &[f32],
    c: &[f32],
    k: usize,
) -> Result<PositionMetrics, CompareError> {
    let vocab = r.len();
    if c.len() != vocab {
        return Err(CompareError::Shape {
            reference: [1, vocab],
            candidate: [1, c.len()],
        });
    }
    if k == 0 || k > vocab {
        return Err(CompareError::TopK { k, vocab });
    }
    let s = sums(r, c);
    for (side, row, acc) in [(Side::Reference, r, s.rr), (Side::Candidate, c, s.cc)] {
        // A NaN or infinity anywhere makes the sum of squares non-finite (finite f32 squares
        // cannot overflow f64), so the per-element check runs only on failure.
        if !acc.is_finite() {
            let (index, v) = first_non_finite(row).expect("a non-finite sum has a cause");
            return Err(CompareError::NonFinite {
                side,
                position,
                index,
                value: format!("{v}"),
            });
        }
        if acc == 0.0 {
            return Err(CompareError::ZeroNorm { side, position });
        }
    }
    let reference_top = top_k(r, k.max(2));
    let candidate_top = top_k(c, k);
    let ra = reference_top[0].token_id as usize;
    let ca = candidate_top[0].token_id as usize;
    let reference_margin = if vocab > 1 {
        reference_top[0].logit as f64 - reference_top[1].logit as f64
    } else {
        0.0
    };
    let reference_top: Vec<TopToken> = reference_top.into_iter().take(k).collect();
    let top_k_overlap = reference_top
        .iter()
        .filter(|t| candidate_top.iter().any(|u| u.token_id == t.token_id))
        .count();
    let m_r = r[ra] as f64;
    let m_c = c[ca] as f64;
    let sm = softmax_sums(r, c, m_r, m_c);
    let kl = sm.s / sm.z_r - (m_r + sm.z_r.ln()) + (m_c + sm.z_c.ln());
    Ok(PositionMetrics {
        position,
        reference_argmax: ra as u32,
        candidate_argmax: ca as u32,
        top_k_overlap,
        max_abs_error: s.max_abs,
        mean_abs_error: s.sum_abs / vocab as f64,
        cosine: s.dot / (s.rr.sqrt() * s.cc.sqrt()),
        kl_divergence: if kl < 0.0 { 0.0 } else { kl },
        // The candidate's top-k is sorted by the rank order itself: a hit there is the rank.
        reference_argmax_rank: candidate_top
            .iter()
            .position(|t| t.token_id as usize == ra)
            .map_or_else(|| rank_of(c, ra), |i| i as u64 + 1),
        reference_margin,
        reference_top,
        candidate_top,
    })
}

/// The log-softmax of a row (f64 arithmetic, `f32` result): logits become log-probabilities,
/// the form an API reports (`logprob`), so a reference and a server compare in one unit.
pub fn log_softmax(row: &[f32]) -> Vec<f32> {
    let m = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
    let z: f64 = row.iter().map(|&x| (x as f64 - m).exp()).sum();
    let lse = m + z.ln();
    row.iter().map(|&x| (x as f64 - lse) as f32).collect()
}

/// Checks that two token-id lists are the same.
pub fn check_token_ids(reference: &[i64], candidate: &[i64]) -> Result<(), CompareError> {
    if reference.len() != candidate.len() {
        return Err(CompareError::TokenIds {
            detail: format!(
                "the reference has {} input tokens, the candidate {}",
                reference.len(),
                candidate.len()
            ),
        });
    }
    if let Some(i) = reference.iter().zip(candidate).position(|(a, b)| a != b) {
        return Err(CompareError::TokenIds {
            detail: format!(
                "input token {i} is {} in the reference and {} in the candidate",
                reference[i], candidate[i]
            ),
        });
    }
    Ok(())
}

/// Compares every position of two tensors.
pub fn compare(
    reference: &Logits,
    candidate: &Logits,
    k: usize,
) -> Result<Vec<PositionMetrics>, CompareError> {
    if (reference.positions, reference.vocab) != (candidate.positions, candidate.vocab) {
        return Err(CompareError::Shape {
            reference: [reference.positions, reference.vocab],
            candidate: [candidate.positions, candidate.vocab],
        });
    }
    (0..reference.positions)
        .map(|p| compare_rows(p, reference.row(p), candidate.row(p), k))
        .collect()
}

/// The worst case of each metric over positions, with the first position where it occurs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// Positions compared.
    pub positions: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// `k` of the top-k overlap.
    pub top_k: usize,
    /// Positions whose argmaxes agree.
    pub argmax_agreement: usize,
    /// First position whose argmaxes differ.
    pub first_argmax_mismatch: Option<usize>,
    /// Smallest top-k overlap and its position.
    pub min_top_k_overlap: Worst<usize>,
    /// Largest max-abs error and its position.
    pub max_abs_error: Worst<f64>,
    /// Largest mean-abs error and its position.
    pub max_mean_abs_error: Worst<f64>,
    /// Smallest cosine and its position.
    pub min_cosine: Worst<f64>,
    /// Largest KL divergence and its position.
    pub max_kl_divergence: Worst<f64>,
    /// Largest rank of the reference argmax in the candidate and its position.
    pub max_reference_argmax_rank: Worst<u64>,
}

/// A worst value and the first position holding it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Worst<T> {
    /// The value.
    pub value: T,
    /// Where.
    pub position: usize,
}

/// A per-position row of a comparison (full or top-k): where it is in the sequence.
pub(crate) trait Positioned {
    /// The row's position.
    fn position(&self) -> usize;
}

impl Positioned for PositionMetrics {
    fn position(&self) -> usize {
        self.position
    }
}

/// The worst value of `get` over non-empty `rows` (`worse(a, b)`: a is worse than b) and the
/// first position holding it.
pub(crate) fn worst<R: Positioned, T: Copy>(
    rows: &[R],
    get: impl Fn(&R) -> T,
    worse: fn(&T, &T) -> bool,
) -> Worst<T> {
    let mut w = Worst {
        value: get(&rows[0]),
        position: rows[0].position(),
    };
    for r in &rows[1..] {
        let v = get(r);
        if worse(&v, &w.value) {
            w = Worst {
                value: v,
                position: r.position(),
            };
        }
    }
    w
}

/// Summarises per-position metrics (`None` when there are none).
pub fn summarize(rows: &[PositionMetrics], vocab: usize, k: usize) -> Option<Summary> {
    if rows.is_empty() {
        return None;
    }
    Some(Summary {
        positions: rows.len(),
        vocab,
        top_k: k,
        argmax_agreement: rows.iter().filter(|r| r.argmax_equal()).count(),
        first_argmax_mismatch: rows.iter().find(|r| !r.argmax_equal()).map(|r| r.position),
        min_top_k_overlap: worst(rows, |r| r.top_k_overlap, |a, b| a < b),
        max_abs_error: worst(rows, |r| r.max_abs_error, |a, b| a > b),
        max_mean_abs_error: worst(rows, |r| r.mean_abs_error, |a, b| a > b),
        min_cosine: worst(rows, |r| r.cosine, |a, b| a < b),
        max_kl_divergence: worst(rows, |r| r.kl_divergence, |a, b| a > b),
        max_reference_argmax_rank: worst(rows, |r| r.reference_argmax_rank, |a, b| a > b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(t: &[TopToken]) -> Vec<u32> {
        t.iter().map(|t| t.token_id).collect()
    }

    #[test]
    fn exp_matches_std_on_the_range() {
        let mut x = 0.0f64;
        while x > -750.0 {
            let (a, b) = (exp_nonpos(x), x.exp());
            if x >= -708.0 {
                assert!(((a - b) / b).abs() < 5e-16, "x={x} {a} {b}");
            } else {
                assert_eq!(a, 0.0, "x={x}");
            }
            x -= 0.0371;
        }
        assert_eq!(exp_nonpos(0.0), 1.0);
        assert_eq!(exp_nonpos(-1e9), 0.0);
    }

    #[test]
    fn ties_go_to_the_lowest_index_and_negative_zero_ranks_below_zero() {
        let row = [1.0, 3.0, 3.0, -0.0, 0.0, 3.0];
        let t = top_k(&row, 6);
        assert_eq!(ids(&t), vec![1, 2, 5, 0, 4, 3]);
        assert_eq!(rank_of(&row, 1), 1);
        assert_eq!(rank_of(&row, 2), 2);
        assert_eq!(rank_of(&row, 5), 3);
        assert_eq!(rank_of(&row, 3), 6);
        // Candidate ties with the reference argmax: lowest index wins, rank 1 only there.
        let m = compare_rows(0, &[0.0, 5.0, 5.0, 1.0], &[0.0, 5.0, 5.0, 1.0], 2).unwrap();
        assert_eq!((m.reference_argmax, m.candidate_argmax), (1, 1));
        assert_eq!(m.reference_argmax_rank, 1);
        assert_eq!(m.reference_margin, 0.0);
    }

    #[test]
    fn nan_and_infinity_are_refused_with_their_place() {
        let e = compare_rows(3, &[1.0, f32::NAN, 2.0], &[1.0, 2.0, 3.0], 1).unwrap_err();
        assert_eq!(
            e,
            CompareError::NonFinite {
                side: Side::Reference,
                position: 3,
                index: 1,
                value: "NaN".into()
            }
        );
        let e = compare_rows(0, &[1.0, 2.0, 3.0], &[1.0, 2.0, f32::NEG_INFINITY], 1).unwrap_err();
        assert!(matches!(
            e,
            CompareError::NonFinite {
                side: Side::Candidate,
                index: 2,
                ..
            }
        ));
        assert!(e.to_string().contains("-inf"));
    }

    #[test]
    fn a_permuted_top_ten_overlaps_fully_and_a_shifted_one_does_not() {
        let vocab = 1000;
        let base: Vec<f32> = (0..vocab).map(|i| (i % 97) as f32 * 0.01).collect();
        let mut r = base.clone();
        let mut c = base.clone();
        let top: Vec<usize> = (0..10).map(|i| 100 + i * 37).collect();
        for (n, &t) in top.iter().enumerate() {
            r[t] = 10.0 + n as f32;
            c[t] = 19.0 - n as f32; // same ten tokens, reversed order
        }
        let m = compare_rows(0, &r, &c, 10).unwrap();
        assert_eq!(m.top_k_overlap, 10);
        assert_eq!(m.reference_argmax as usize, top[9]);
        assert_eq!(m.candidate_argmax as usize, top[0]);
        assert_eq!(m.reference_argmax_rank, 10);
        let mut d = base.clone();
        for (n, &t) in top.iter().enumerate().take(7) {
            d[t] = 10.0 + n as f32;
        }
        for n in 0..3 {
            d[900 + n] = 30.0;
        }
        let m = compare_rows(0, &r, &d, 10).unwrap();
        assert_eq!(m.top_k_overlap, 7);
    }

    #[test]
    fn orthogonal_rows_have_cosine_zero_and_identical_rows_kl_zero() {
        let m = compare_rows(0, &[1.0, 0.0, 0.0, 0.0], &[0.0, 2.0, 0.0, 0.0], 1).unwrap();
        assert_eq!(m.cosine, 0.0);
        let row: Vec<f32> = (0..50_000)
            .map(|i| ((i * 7919) % 1013) as f32 / 37.0 - 9.0)
            .collect();
        let m = compare_rows(0, &row, &row, 10).unwrap();
        assert_eq!(m.kl_divergence, 0.0);
        assert_eq!(m.max_abs_error, 0.0);
        assert_eq!(m.mean_abs_error, 0.0);
        assert!((m.cosine - 1.0).abs() < 1e-15);
        assert_eq!(m.top_k_overlap, 10);
        assert_eq!(m.reference_argmax_rank, 1);
        // A constant shift changes every logit but no probability.
        let shifted: Vec<f32> = row.iter().map(|x| x + 4.0).collect();
        let m = compare_rows(0, &row, &shifted, 10).unwrap();
        assert!(m.kl_divergence < 1e-12, "{}", m.kl_divergence);
        assert!((m.max_abs_error - 4.0).abs() < 1e-5);
    }

    #[test]
    fn kl_matches_a_direct_computation() {
        let r = [0.5f32, 1.5, -2.0, 0.0];
        let c = [1.0f32, 0.25, -1.0, 0.5];
        let sm = |v: &[f32]| {
            let z: f64 = v.iter().map(|&x| (x as f64).exp()).sum();
            v.iter()
                .map(|&x| (x as f64).exp() / z)
                .collect::<Vec<f64>>()
        };
        let (p, q) = (sm(&r), sm(&c));
        let want: f64 = p.iter().zip(&q).map(|(a, b)| a * (a / b).ln()).sum();
        let m = compare_rows(0, &r, &c, 2).unwrap();
        assert!(
            (m.kl_divergence - want).abs() < 1e-14,
            "{} {want}",
            m.kl_divergence
        );
        assert!((m.mean_abs_error - (0.5 + 1.25 + 1.0 + 0.5) / 4.0).abs() < 1e-15);
        assert_eq!(m.max_abs_error, 1.25);
    }

    #[test]
    fn shape_token_and_zero_norm_failures_are_named() {
        let a = Logits::from_rows(&[vec![1.0, 2.0]]).unwrap();
        let b = Logits::from_rows(&[vec![1.0, 2.0, 3.0]]).unwrap();
        assert!(matches!(
            compare(&a, &b, 1),
            Err(CompareError::Shape { .. })
        ));
        assert!(check_token_ids(&[1, 2], &[1, 3])
            .unwrap_err()
            .to_string()
            .contains("input token 1"));
        assert!(check_token_ids(&[1], &[1, 3]).is_err());
        assert!(matches!(
            compare_rows(0, &[0.0, 0.0], &[1.0, 0.0], 1),
            Err(CompareError::ZeroNorm {
                side: Side::Reference,
                ..
            })
        ));
        assert!(matches!(
            compare_rows(0, &[1.0], &[1.0], 2),
            Err(CompareError::TopK { .. })
        ));
    }

    #[test]
    fn the_summary_reports_the_worst_position() {
        let r = Logits::from_rows(&[vec![1.0, 2.0, 3.0], vec![3.0, 2.0, 1.0]]).unwrap();
        let c = Logits::from_rows(&[vec![1.0, 2.0, 3.0], vec![1.0, 2.0, 3.5]]).unwrap();
        let rows = compare(&r, &c, 2).unwrap();
        let s = summarize(&rows, 3, 2).unwrap();
        assert_eq!(s.argmax_agreement, 1);
        assert_eq!(s.first_argmax_mismatch, Some(1));
        assert_eq!(
            s.max_abs_error,
            Worst {
                value: 2.5,
                position: 1
            }
        );
        assert_eq!(s.max_reference_argmax_rank.value, 3);
        assert_eq!(s.min_top_k_overlap.value, 1);
    }
}
