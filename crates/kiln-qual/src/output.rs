//! Terminal output: every byte the CLI writes goes through this module.
//!
//! - Machine output (`--json`) goes to stdout, human diagnostics to stderr.
//! - Untrusted text (paths, ids, key names, case `details`, log tails, error messages that
//!   embed them) is shown through [`esc`] / [`esc_path`], i.e. `qual_json::escape` (controls as
//!   `\xNN`, bidirectional overrides as `\u{XXXX}`), so a document cannot print a line of its
//!   own or drive the terminal. JSON output has DEL, C1 and bidi characters as `\uXXXX`.
//! - Colour: clap's styled help and usage errors, on a terminal only, never with `NO_COLOR`
//!   set, and as `--color auto|always|never` says ([`color_for`]); kiln-qual's own output has
//!   none. A usage error that quotes typed text with a control character in it is shown
//!   escaped and plain, never styled.
//! - Verbosity: the global `-q`/`--quiet` and `-v`/`--verbose` ([`set_verbosity`]): quiet
//!   hides progress bars and the long summaries, never a verdict, an error or a written path;
//!   verbose adds detail where a command has more to say (see the README).
//! - A closed stdout (`kiln-qual … | head -1`) ends the process quietly with status 141
//!   (128 + SIGPIPE, what a shell reports for a filter killed by SIGPIPE), never a panic;
//!   `run` prints its receipt path with [`try_outln`] instead, so a closed stdout never turns
//!   a written receipt's exit code into another. Write errors on stderr are ignored.

use serde::Serialize;
use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

/// `--color`: when clap's help and usage errors are styled.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set to a non-empty value.
    #[default]
    Auto,
    /// Always (also through a pipe, and whatever `NO_COLOR` says).
    Always,
    /// Never.
    Never,
}

/// The `--color` value on the command line (the last one before `--`), read before clap
/// parses so that clap's own errors follow it; an invalid value is `auto` here and clap's
/// usage error later.
pub fn color_from_args(args: &[std::ffi::OsString]) -> ColorWhen {
    let mut when = ColorWhen::Auto;
    let mut it = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(a) = it.next() {
        let value = match a.as_ref() {
            "--" => break,
            "--color" => it.next().map(|v| v.into_owned()),
            s => s.strip_prefix("--color=").map(str::to_owned),
        };
        when = match value.as_deref() {
            Some("always") => ColorWhen::Always,
            Some("never") => ColorWhen::Never,
            Some(_) => ColorWhen::Auto,
            None => when,
        };
    }
    when
}

/// Whether text written to stdout (`stdout = true`) or stderr is styled: `--color always`
/// yes, `never` no; `auto` only on a terminal and never when `NO_COLOR` is set to a non-empty
/// value (<https://no-color.org>).
pub fn color_for(when: ColorWhen, stdout: bool) -> bool {
    use std::io::IsTerminal;
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && if stdout {
                    std::io::stdout().is_terminal()
                } else {
                    std::io::stderr().is_terminal()
                }
        }
    }
}

/// -1 quiet, 0 normal, 1 and more verbose.
static VERBOSITY: std::sync::atomic::AtomicI8 = std::sync::atomic::AtomicI8::new(0);

/// Records the global `-q`/`-v` (called once, before the command runs).
pub fn set_verbosity(quiet: bool, verbose: u8) {
    let level = if quiet { -1 } else { verbose.min(3) as i8 };
    VERBOSITY.store(level, std::sync::atomic::Ordering::Relaxed);
}

/// `-q`/`--quiet` was given: no progress, no long summaries.
pub fn quiet() -> bool {
    VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) < 0
}

/// `-v`/`--verbose` was given.
pub fn verbose() -> bool {
    VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) > 0
}

/// Exit status after stdout was closed by its reader.
pub const BROKEN_PIPE: i32 = 128 + 13;

/// Untrusted text for the terminal.
pub fn esc(text: &str) -> Cow<'_, str> {
    qual_json::escape_text(text)
}

/// A path for the terminal (exact bytes, controls and invalid UTF-8 escaped).
pub fn esc_path(path: &Path) -> String {
    qual_json::escape_path(path)
}

/// Writes to stdout; a closed stdout ends the process with [`BROKEN_PIPE`], quietly.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE);
        }
    }
}

/// Writes a line to stdout and reports failure instead of exiting (for `run`, whose exit
/// code must stay the verdict's once the receipt is written).
pub fn try_outln(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())
}

/// Writes to stderr, ignoring errors (a closed stderr must not stop or crash the command).
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `print!` through [`write_out`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_out(format_args!($($arg)*)) };
}

/// `println!` through [`write_out`].
macro_rules! outln {
    () => { $crate::output::write_out(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` through [`write_err`].
macro_rules! err {
    ($($arg:tt)*) => { $crate::output::write_err(format_args!($($arg)*)) };
}

/// `eprintln!` through [`write_err`].
macro_rules! errln {
    () => { $crate::output::write_err(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::output::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {err, errln, out, outln};

/// Prints a value as pretty JSON with a trailing newline on stdout.
pub fn print_json<T: Serialize>(value: &T) {
    // serde's pretty format, not `qual_json::to_pretty_json`: this document's bytes (field
    // order, raw UTF-8, serde's float spelling) are its format; the Python-compatible writer
    // would change them.
    match serde_json::to_string_pretty(value) {
        Ok(text) => print_json_text(&text),
        Err(e) => errln!("kiln-qual: failed to serialize the report: {e}"),
    }
}

/// Prints serialized JSON (with its own newline handling) safely for a terminal.
pub fn print_json_text(text: &str) {
    let text = qual_json::escape::escape_json_text(text);
    if text.ends_with('\n') {
        out!("{text}");
    } else {
        outln!("{text}");
    }
}

/// Renders rows as a left-aligned text table with a header line (cells are escaped;
/// the layout is [`qual_json::table`]'s).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<Cow<'_, str>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| esc(c)).collect())
        .collect();
    qual_json::table::render(header, &rows)
}
