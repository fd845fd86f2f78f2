//! `kiln-qual completions SHELL` and `kiln-qual man [--out-dir DIR]`: shell completion
//! scripts and man pages, generated from the command-line definition (clap_complete,
//! clap_mangen).
//!
//! - Completions: clap_complete's scripts, with one repair for bash: clap_complete 4.6 names
//!   the states of a hyphenated binary two ways (`kiln__qual__subcmd__receipt` where it walks
//!   the words, `kiln__subcmd__qual__subcmd__receipt` where it offers the words), so bash
//!   completed only the first word and fell back to file names after it. [`repair_bash`]
//!   makes the second spelling the first (a no-op once clap_complete agrees with itself);
//!   tests complete `receipt ch<TAB>` in real bash, zsh and fish.
//! - Man pages: `man` prints `kiln-qual(1)`, whose SUBCOMMANDS section names each subcommand
//!   (`kiln-qual receipt`) without pointing to pages that may not be installed; `man
//!   --out-dir DIR` writes `kiln-qual.1` and one page per subcommand at every level
//!   (`kiln-qual-receipt-check.1`), where every page a SUBCOMMANDS section names exists. No
//!   page is overwritten: every target is checked before the first one is written.

use crate::exit;
use crate::output::{self, errln, esc_path};
use clap::Args;
use std::path::{Path, PathBuf};

/// Arguments of `kiln-qual man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write `kiln-qual.1` and a page for every subcommand here (the directory must exist;
    /// no page is overwritten) instead of printing the top page.
    #[arg(long, value_name = "DIR", value_parser = super::args::Path)]
    pub out_dir: Option<PathBuf>,
}

/// The bash state names clap_complete 4.6 offers words under, for a binary named `bin`:
/// every `-` of the name spelled `__subcmd__` (`kiln__subcmd__qual`), where the word walk
/// names the same states with `__` (`kiln__qual`).
pub fn repair_bash(script: &str, bin: &str) -> String {
    let walked = bin.replace('-', "__");
    let offered = bin.replace('-', "__subcmd__");
    if walked == offered {
        return script.to_owned();
    }
    script.replace(&offered, &walked)
}

/// Runs `kiln-qual completions SHELL`.
pub fn completions(shell: clap_complete::Shell, cmd: &mut clap::Command) -> i32 {
    let mut buf = Vec::new();
    clap_complete::generate(shell, cmd, "kiln-qual", &mut buf);
    let text = String::from_utf8_lossy(&buf);
    match shell {
        clap_complete::Shell::Bash => output::out!("{}", repair_bash(&text, "kiln-qual")),
        _ => output::out!("{text}"),
    }
    exit::OK
}

/// Runs `kiln-qual man`.
pub fn man(a: &ManArgs, cmd: clap::Command) -> i32 {
    let rendered = match &a.out_dir {
        None => top_page(cmd).map(|page| vec![(PathBuf::new(), page)]),
        Some(dir) => all_pages(cmd, dir),
    };
    let pages = match rendered {
        Ok(p) => p,
        Err(e) => {
            errln!("kiln-qual: failed to render the man pages: {e}");
            return exit::FAILED;
        }
    };
    let Some(dir) = &a.out_dir else {
        output::out!("{}", String::from_utf8_lossy(&pages[0].1));
        return exit::OK;
    };
    if !dir.is_dir() {
        errln!(
            "kiln-qual: failed to write the man pages: {} is not a directory; create it first",
            esc_path(dir)
        );
        return exit::USAGE;
    }
    let existing: Vec<&PathBuf> = pages
        .iter()
        .map(|(p, _)| p)
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if !existing.is_empty() {
        for p in existing {
            errln!(
                "kiln-qual: failed to write the man pages: {} exists (pages are never overwritten); choose an empty --out-dir",
                esc_path(p)
            );
        }
        return exit::FAILED;
    }
    for (path, bytes) in &pages {
        if let Err(e) = qual_json::publish::write_new(path, bytes) {
            errln!("kiln-qual: failed to write {}: {e}", esc_path(path));
            return exit::FAILED;
        }
    }
    errln!(
        "kiln-qual: wrote {} man pages to {}",
        pages.len(),
        esc_path(dir)
    );
    exit::OK
}

/// Every page (the command and each visible subcommand at every level), with its path in
/// `dir`; what `clap_mangen::generate_to` would write, rendered in memory.
fn all_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    fn walk(
        cmd: clap::Command,
        dir: &Path,
        out: &mut Vec<(PathBuf, Vec<u8>)>,
    ) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            walk(sub, dir, out)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let mut buf = Vec::new();
        man.render(&mut buf)?;
        out.push((dir.join(man.get_filename()), buf));
        Ok(())
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    walk(cmd, dir, &mut out)?;
    out.reverse();
    Ok(out)
}

/// The top page alone: clap_mangen's sections, with a SUBCOMMANDS section that names each
/// subcommand as it is typed and refers to `--help` and `man --out-dir` for its page.
fn top_page(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    buf.extend_from_slice(b".SH SUBCOMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        buf.extend_from_slice(b".TP\n");
        let name = format!("kiln-qual {}", sub.get_name());
        buf.extend_from_slice(format!("\\fB{}\\fR\n", roff_text(&name)).as_bytes());
        if let Some(about) = sub.get_about() {
            for line in about.to_string().lines() {
                buf.extend_from_slice(format!("{}\n", roff_text(line)).as_bytes());
            }
        }
    }
    buf.extend_from_slice(
        format!(
            ".PP\n{}\n",
            roff_text(
                "Each subcommand describes itself with --help; kiln-qual man --out-dir DIR \
                 writes a page for every subcommand at every level."
            )
        )
        .as_bytes(),
    );
    man.render_version_section(&mut buf)?;
    Ok(buf)
}

/// Text for a roff line: backslashes and hyphens escaped, a leading control character
/// neutralised.
fn roff_text(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_repair_joins_the_two_spellings() {
        let s = "cmd=\"kiln__qual__subcmd__receipt\"\n    kiln__subcmd__qual__subcmd__receipt)\n";
        assert_eq!(
            repair_bash(s, "kiln-qual"),
            "cmd=\"kiln__qual__subcmd__receipt\"\n    kiln__qual__subcmd__receipt)\n"
        );
        assert_eq!(repair_bash(s, "kiln"), s);
    }

    #[test]
    fn roff_text_is_escaped() {
        assert_eq!(roff_text(".x-y\\"), "\\&.x\\-y\\e");
    }
}
