//! Lexical constants, enumerations and bounds of the workload v1 contract.
//!
//! The values are facts of the Kiln v1 wire contract and must not drift: enum lists are kept
//! in the sorted order the original implementation prints in its error messages.

/// `schema_version` of workload v1.
pub const SCHEMA_VERSION: i64 = 1;
/// Case-result format name.
pub const RESULT_FORMAT: &str = "qualification-case-result-v1";
/// Environment variable naming the case-result path.
pub const RESULT_PATH_VARIABLE: &str = "KILN_QUALIFICATION_CASE_RESULT";
/// Environment variable naming the selected variant.
pub const VARIANT_ID_VARIABLE: &str = "KILN_QUALIFICATION_VARIANT_ID";
/// Environment variable that tells a case which network isolation it runs under.
pub const NETWORK_ISOLATION_VARIABLE: &str = "KILN_QUALIFICATION_NETWORK_ISOLATION";
/// Environment keys a workload may not set.
pub const RUNNER_OWNED_ENVIRONMENT: [&str; 2] = [RESULT_PATH_VARIABLE, VARIANT_ID_VARIABLE];
/// Policy id of the closed case environment.
pub const CASE_ENVIRONMENT_POLICY: &str = "closed-qualification-case-v1";
/// Host variables a case inherits under `closed-qualification-case-v1` (when present); every
/// other variable comes from the case's own `environment` or is runner-owned.
pub const CASE_ENVIRONMENT_BASE: [&str; 11] = [
    "CARGO_HOME",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "RUSTUP_HOME",
    "SHELL",
    "TMPDIR",
    "USER",
];
/// Placeholders the runner fills in; they cannot be declared as variables.
pub const RESERVED_PLACEHOLDERS: [&str; 3] = ["seed", "model_path", "host_id"];
/// Kinds whose every variant must consume `${model_path}`.
pub const MODEL_KINDS: [&str; 5] = ["serving", "performance", "training", "eval", "soak"];

/// Most repetitions of the case sequence.
pub const MAX_REPETITIONS: u64 = 1000;
/// Longest per-execution deadline (48 h).
pub const MAX_CASE_TIMEOUT_SECONDS: u64 = 172_800;
/// Largest declared wall budget of a variant (7 days).
pub const MAX_DECLARED_WALL_SECONDS: u64 = 604_800;
/// Most case executions of a variant (repetitions × cases).
pub const MAX_CASE_EXECUTIONS: u64 = 10_000;

/// Workload kinds.
pub const KINDS: [&str; 7] = [
    "correctness",
    "environment",
    "eval",
    "performance",
    "serving",
    "soak",
    "training",
];
/// Backend families.
pub const BACKENDS: [&str; 5] = ["cpu", "cuda", "metal", "rocm", "vulkan"];
/// Accelerator backends (they require a device).
pub const ACCELERATOR_BACKENDS: [&str; 4] = ["cuda", "metal", "rocm", "vulkan"];
/// Seed delivery modes.
pub const SEED_DELIVERIES: [&str; 4] = ["argv", "environment", "fixed_fixture", "not_applicable"];
/// Variable types.
pub const VARIABLE_TYPES: [&str; 4] = ["boolean", "integer", "number", "string"];
/// Device requirements.
pub const DEVICE_REQUIREMENTS: [&str; 2] = ["none", "required"];
/// Skip policies.
pub const SKIP_POLICIES: [&str; 2] = ["allow", "fail"];
/// Output streams.
pub const STREAMS: [&str; 3] = ["combined", "stderr", "stdout"];
/// Output assertion matches.
pub const MATCHES: [&str; 2] = ["forbidden", "required"];
/// Result producers.
pub const PRODUCERS: [&str; 2] = ["command", "runner"];
/// Comparison modes.
pub const MODES: [&str; 4] = [
    "cross_backend_correctness",
    "declared_ab_variants",
    "same_environment_performance",
    "self_contained_correctness",
];
/// Metric scopes.
pub const SCOPES: [&str; 1] = ["result"];
/// Metric classes.
pub const METRIC_CLASSES: [&str; 2] = ["correctness", "performance"];
/// Comparison operators.
pub const OPERATORS: [&str; 3] = ["equal", "not_greater", "not_less"];

/// Top-level repository directories that judge a case and are read-only inside its box: a
/// case's working directory may not be at or below them (the runner also refuses the
/// receipt's directory and, for a linked worktree, the git directories its `.git` names).
pub const PROTECTED_TOP_LEVEL: [&str; 2] = [".git", ".qualification"];

/// Shell executables (lowercased basenames).
pub const SHELLS: [&str; 9] = [
    "sh",
    "bash",
    "dash",
    "zsh",
    "fish",
    "pwsh",
    "powershell",
    "cmd",
    "cmd.exe",
];
/// Shell evaluation flags (lowercased).
pub const SHELL_EVAL_FLAGS: [&str; 4] = ["-c", "/c", "-command", "-encodedcommand"];

/// A runner-owned metric's fixed definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunnerMetric {
    /// Metric name.
    pub name: &'static str,
    /// Unit.
    pub unit: &'static str,
    /// Aggregation.
    pub aggregation: &'static str,
    /// Direction.
    pub lower_is_better: bool,
}

/// The runner-owned metrics, sorted by name.
pub const RUNNER_METRICS: [RunnerMetric; 3] = [
    RunnerMetric {
        name: "case_pass",
        unit: "bool",
        aggregation: "exact",
        lower_is_better: false,
    },
    RunnerMetric {
        name: "exit_code",
        unit: "code",
        aggregation: "exact",
        lower_is_better: false,
    },
    RunnerMetric {
        name: "output_assertion_failures",
        unit: "count",
        aggregation: "sum",
        lower_is_better: true,
    },
];

/// The canonical definition of a runner metric, if `name` is one.
pub fn runner_metric(name: &str) -> Option<RunnerMetric> {
    RUNNER_METRICS.iter().copied().find(|m| m.name == name)
}

/// A lexical shape of the contract: an ASCII first byte from one set, then between `min` and
/// `max` bytes from another, nothing else. Every identifier-like pattern of the original
/// (`ID_RE`, `VARIABLE_RE`, …) is of this form; its regular expression is kept in `pattern`
/// (the tests check the matcher against the `regex` crate on generated strings). These are
/// matched by hand rather than with `regex`: compiling the eight patterns, whose bounded
/// repetitions (`{2,127}`) unroll into large automata, was a third of the instructions of
/// `workload check` on one file.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The equivalent regular expression (Python and `regex` syntax).
    pub pattern: &'static str,
    first: fn(u8) -> bool,
    rest: fn(u8) -> bool,
    min: usize,
    max: usize,
}

impl Shape {
    /// Whether all of `s` has this shape (a full match).
    pub fn is_match(&self, s: &str) -> bool {
        let b = s.as_bytes();
        match b.split_first() {
            Some((&f, rest)) => {
                (self.first)(f)
                    && (self.min..=self.max).contains(&rest.len())
                    && rest.iter().all(|&c| (self.rest)(c))
            }
            None => false,
        }
    }
}

fn lower_digit(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `^[a-z0-9][a-z0-9._-]{2,127}$`
pub static IDENTIFIER: Shape = Shape {
    pattern: r"^[a-z0-9][a-z0-9._-]{2,127}$",
    first: lower_digit,
    rest: |c| lower_digit(c) || matches!(c, b'.' | b'_' | b'-'),
    min: 2,
    max: 127,
};
/// `^[a-z][a-z0-9_]{1,63}$`
pub static VARIABLE_NAME: Shape = Shape {
    pattern: r"^[a-z][a-z0-9_]{1,63}$",
    first: |c| c.is_ascii_lowercase(),
    rest: |c| lower_digit(c) || c == b'_',
    min: 1,
    max: 63,
};
/// `^[a-z][a-z0-9_.-]{0,127}$`
pub static METRIC_NAME: Shape = Shape {
    pattern: r"^[a-z][a-z0-9_.-]{0,127}$",
    first: |c| c.is_ascii_lowercase(),
    rest: |c| lower_digit(c) || matches!(c, b'_' | b'.' | b'-'),
    min: 0,
    max: 127,
};
/// `^[A-Z_][A-Z0-9_]*$`
pub static ENV_KEY: Shape = Shape {
    pattern: r"^[A-Z_][A-Z0-9_]*$",
    first: |c| c.is_ascii_uppercase() || c == b'_',
    rest: |c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_',
    min: 0,
    max: usize::MAX,
};
/// `^[a-z][a-z0-9_-]*$`
pub static CONFIG_KEY: Shape = Shape {
    pattern: r"^[a-z][a-z0-9_-]*$",
    first: |c| c.is_ascii_lowercase(),
    rest: |c| lower_digit(c) || matches!(c, b'_' | b'-'),
    min: 0,
    max: usize::MAX,
};
/// `^[a-z0-9][a-z0-9._-]{1,63}$`
pub static HOST_ID: Shape = Shape {
    pattern: r"^[a-z0-9][a-z0-9._-]{1,63}$",
    first: lower_digit,
    rest: |c| lower_digit(c) || matches!(c, b'.' | b'_' | b'-'),
    min: 1,
    max: 63,
};

/// `^[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)*$`: dot-separated [`CONFIG_KEY`] segments.
pub fn is_dot_path(s: &str) -> bool {
    s.split('.').all(|seg| CONFIG_KEY.is_match(seg))
}

/// The original's placeholder pattern, `^\$\{([a-z][a-z0-9_]{1,63}|seed)\}$` (`seed` is a
/// [`VARIABLE_NAME`] too, so the alternative adds nothing).
pub const PLACEHOLDER_PATTERN: &str = r"^\$\{([a-z][a-z0-9_]{1,63}|seed)\}$";

/// The variable name of a whole-value placeholder (`${name}`), if `s` is one.
pub fn placeholder_name(s: &str) -> Option<&str> {
    s.strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .filter(|n| VARIABLE_NAME.is_match(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use regex::Regex;

    const SHAPES: [&Shape; 6] = [
        &IDENTIFIER,
        &VARIABLE_NAME,
        &METRIC_NAME,
        &ENV_KEY,
        &CONFIG_KEY,
        &HOST_ID,
    ];
    const DOT_PATH_PATTERN: &str = r"^[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)*$";

    fn check(s: &str) {
        for shape in SHAPES {
            let re = Regex::new(shape.pattern).unwrap();
            assert_eq!(
                shape.is_match(s),
                re.is_match(s),
                "{} on {s:?}",
                shape.pattern
            );
        }
        let dot = Regex::new(DOT_PATH_PATTERN).unwrap();
        assert_eq!(is_dot_path(s), dot.is_match(s), "dot path on {s:?}");
        let ph = Regex::new(PLACEHOLDER_PATTERN).unwrap();
        let want = ph.captures(s).map(|c| c.get(1).unwrap().as_str());
        assert_eq!(placeholder_name(s), want, "placeholder on {s:?}");
    }

    #[test]
    fn shapes_agree_with_their_regular_expressions_at_the_length_bounds() {
        for n in [0usize, 1, 2, 3, 63, 64, 65, 127, 128, 129, 200] {
            for first in ["a", "Z", "_", "0", ".", "é"] {
                for fill in ["a", "A", "_", "-", ".", "9", "é", "\n"] {
                    let s = format!("{first}{}", fill.repeat(n));
                    check(&s);
                    check(&format!("${{{s}}}"));
                }
            }
        }
        for s in [
            "", "${seed}", "${}", "${a}}", "${ab}\n", "a.b", "a..b", ".a", "a.", "a-b.c_d",
        ] {
            check(s);
        }
    }

    proptest! {
        #[test]
        fn shapes_agree_with_their_regular_expressions(s in r"(\$\{)?[a-zA-Z0-9._\-${}é\n]{0,140}\}?") {
            check(&s);
        }
    }
}
