//! Argument value parsers shared by every subcommand: the one place that range-checks
//! numbers and vets path arguments, so a bad value is a usage error (exit 2) naming the flag
//! before any work starts (no server is launched, no file is touched).
//!
//! - Numbers: [`f64_in`], [`ms_in`], [`seconds_in`] (finite, within an inclusive range, so
//!   `1e300` or `1e-300` never reach a `Duration` or a rate) and [`count`] for integers.
//! - Paths: [`Path`] keeps the exact bytes (`OsString`, never a lossy conversion that would
//!   name a different file) and refuses control characters (a newline or escape in a path
//!   argument is a mistake or an attack on whoever reads the output). [`Program`] is a path
//!   that may also be a bare program name (`--python python3`), looked up on `PATH` now and
//!   kept as the absolute path found (as a shell would find it), so a missing program is a
//!   usage error before anything runs.

use clap::builder::{RangedU64ValueParser, TypedValueParser};
use clap::error::ErrorKind;
use std::ffi::OsStr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

fn parse_f64(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| {
            format!(
                "expected a finite number, got {}",
                qual_json::escape_text(s)
            )
        })
}

fn check_range(x: f64, range: &RangeInclusive<f64>, unit: &str) -> Result<f64, String> {
    if range.contains(&x) {
        Ok(x)
    } else {
        Err(format!(
            "must be between {} and {}{unit}",
            range.start(),
            range.end()
        ))
    }
}

/// A finite number within `range` (inclusive).
pub fn f64_in(range: RangeInclusive<f64>) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s| check_range(parse_f64(s)?, &range, "")
}

/// Seconds within `range` (inclusive), as a number of seconds.
pub fn seconds_in(range: RangeInclusive<f64>) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s| check_range(parse_f64(s)?, &range, " seconds")
}

/// Milliseconds within `range` (inclusive), as a `Duration`.
pub fn ms_in(range: RangeInclusive<f64>) -> impl Fn(&str) -> Result<Duration, String> + Clone {
    move |s| {
        let ms = check_range(parse_f64(s)?, &range, " ms")?;
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }
}

/// An integer within `range` (inclusive), as `T`.
pub fn count<T>(range: RangeInclusive<u64>) -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    RangedU64ValueParser::<T>::new().range(range)
}

/// An http header `NAME:VALUE` (name and value trimmed; the name non-empty).
pub fn header(s: &str) -> Result<(String, String), String> {
    let (n, v) = s.split_once(':').ok_or("expected NAME:VALUE")?;
    if n.trim().is_empty() {
        return Err("the header name is empty".into());
    }
    Ok((n.trim().to_string(), v.trim().to_string()))
}

/// A CPU this process may run on: below the affinity-mask size and present on this host.
pub fn cpu(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a CPU number, got {}", qual_json::escape_text(s)))?;
    if n >= 1024 || !std::path::Path::new(&format!("/sys/devices/system/cpu/cpu{n}")).exists() {
        return Err(format!("CPU {n} does not exist on this host"));
    }
    Ok(n)
}

/// A path argument that the library takes as text (UTF-8, no control characters).
pub fn path_text(s: &str) -> Result<String, String> {
    check_path(OsStr::new(s)).map(|()| s.to_owned())
}

/// A path argument: exact bytes, no control characters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Path;

/// Whether a path argument is acceptable (`Err` says why).
pub fn check_path(value: &OsStr) -> Result<(), String> {
    let bytes = value.as_encoded_bytes();
    if bytes.is_empty() {
        return Err("a path must not be empty".into());
    }
    let text = String::from_utf8_lossy(bytes);
    if bytes.iter().any(|&b| b < 0x20 || b == 0x7f)
        || text.chars().any(qual_json::escape::needs_escape)
    {
        return Err("a path must not contain control characters".into());
    }
    Ok(())
}

impl TypedValueParser for Path {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<PathBuf, clap::Error> {
        check_path(value).map_err(|why| {
            let name = arg.map_or_else(|| "...".to_owned(), ToString::to_string);
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{name}': {why}\n",
                    qual_json::escape_path(std::path::Path::new(value))
                ),
            )
            .with_cmd(cmd)
        })?;
        Ok(PathBuf::from(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_range_checked() {
        let rate = f64_in(0.001..=1e6);
        assert!(rate("1e-300").is_err());
        assert!(rate("nan").is_err());
        assert!(rate("inf").is_err());
        assert_eq!(rate("2.5"), Ok(2.5));
        let t = seconds_in(0.001..=86400.0);
        assert!(t("1e300").unwrap_err().contains("between"));
        assert!(ms_in(0.0..=3.6e6)("-1").is_err());
    }

    #[test]
    fn paths_with_controls_are_refused() {
        use std::os::unix::ffi::OsStrExt;
        assert!(check_path(OsStr::new("a\nb")).is_err());
        assert!(check_path(OsStr::new("a\u{1b}[2K")).is_err());
        assert!(check_path(OsStr::new("a\u{9b}")).is_err());
        assert!(check_path(OsStr::new("")).is_err());
        assert!(check_path(OsStr::from_bytes(b"caf\xe9.json")).is_ok());
    }
}

/// A program argument: a path (`./venv/bin/python`, `/usr/bin/python3`, taken as given) or a
/// bare name (`python3`), found on `PATH` as a shell would (the first executable regular
/// file) and made absolute.
#[derive(Clone, Copy, Debug)]
pub struct Program;

/// The first executable regular file called `name` in a `PATH` directory, made absolute.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|p| std::path::absolute(p).ok())
}

impl TypedValueParser for Program {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<PathBuf, clap::Error> {
        let p = Path.parse_ref(cmd, arg, value)?;
        if value.as_encoded_bytes().contains(&b'/') {
            return Ok(p);
        }
        let name = value.to_string_lossy();
        find_on_path(&name).ok_or_else(|| {
            let flag = arg.map_or_else(|| "...".to_owned(), ToString::to_string);
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{flag}': no program of that name is on PATH (install it, or give its path)\n",
                    qual_json::escape_text(&name)
                ),
            )
            .with_cmd(cmd)
        })
    }
}
