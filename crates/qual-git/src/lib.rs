//! qual-git: the one git binding of kiln-qual. Every git query the product makes — HEAD,
//! worktree cleanliness, committed bytes, the index listing, ignore and tracking checks, a
//! config value — goes through [`Repo`], and nothing else in the workspace spawns `git`.
//!
//! # Why this crate exists
//!
//! kiln-qual inspects repositories that a qualification case has just had write access to.
//! git executes programs named by repository state: `core.fsmonitor`, hooks (also via
//! `core.hooksPath`), `.gitattributes` filter drivers (`filter.<x>.clean/smudge/process`),
//! `diff.<x>.textconv`, `diff.external`, `core.pager`, `core.sshCommand`,
//! `credential.helper`, `core.editor`, `gpg.program`, `core.alternateRefsCommand`, all of them
//! also reachable through `include.path` / `includeIf`. A hostile case that writes one of them
//! into `.git/config` would otherwise get a program run by kiln-qual itself, outside the case's
//! sandbox, by the next `git status` (receipt check `--require-current-source`, `source-tree`,
//! the runner's drift check, the latency commands). No repository code runs outside a case.
//!
//! # How (the invariants)
//!
//! Every invocation ([`command`]):
//! - runs the `git` that `qual-trusted` resolved on `PATH` before any case ran (an absolute
//!   path only root can change, re-checked before each start) with a cleared environment
//!   rebuilt from [`command::ENVIRONMENT`] (`LC_ALL=C`, no system or global config, no system attributes,
//!   no prompts, no optional locks, no replace objects, no lazy fetch, `cat` as
//!   pager), `PATH` kept and `HOME` pointing below `/dev/null` (cannot exist); no
//!   inherited `GIT_*` variable reaches git;
//! - passes `--no-pager` and the `-c` overrides of [`command::OVERRIDES`] (command-line
//!   configuration beats every configuration file, included ones too): fsmonitor and the
//!   untracked cache off, hooks from `/dev/null`, every helper, editor, pager, ssh command,
//!   external diff and signature program emptied or `false`, every transport protocol
//!   forbidden, no submodule recursion, no auto-gc;
//! - has stdin null, a deadline ([`command::DEFAULT_DEADLINE`], see [`Repo::with_deadline`])
//!   after which git is killed and [`GitError::Timeout`] reported, stdout bounded
//!   ([`command::MAX_STDOUT_BYTES`]) and stderr drained with its tail kept for errors.
//!
//! Filter and diff drivers have free names, so no override can switch them off. The binding
//! therefore only runs commands that never apply them: `rev-parse`, `ls-files`, `cat-file`
//! (blob bytes as stored, no `--filters`/`--textconv`), `diff-index --cached --name-only`
//! (tree against index, no worktree), `check-ignore`, `config --get`, `merge-base
//! --is-ancestor` (the commit graph only). In particular it never
//! runs `git status`, which applies clean filters (and fsmonitor) to stat-dirty files:
//! [`Repo::status`] compares the index with the worktree in process instead (see below).
//!
//! # Worktree comparison ("clean")
//!
//! - Staged: `git diff-index --cached --name-only -z HEAD` (every index entry when HEAD is
//!   unborn).
//! - Unmerged: any index entry at a stage other than 0.
//! - Worktree: each stage-0 entry of `git ls-files -s -z` is compared with the file system.
//!   Regular files are hashed as git blobs (`blob <len>\0<bytes>`, SHA-1 or SHA-256 as
//!   `git rev-parse --show-object-format` says) and compared with the index object id; the
//!   executable bit must match `100755`/`100644` unless `core.fileMode` is false. Symlinks
//!   (`120000`) are hashed by their target. Files are opened and read under the bounds of
//!   [`tracked`] (regular files only, no symlink followed, bytes and time bounded). A missing path, or one below a leading directory
//!   that is now a symlink, is deleted; a kind mismatch is a type change. A gitlink (`160000`)
//!   whose directory has no `.git` is an unpopulated submodule and clean (as for `git status`);
//!   a populated one must have the recorded commit checked out and be clean by this same rule
//!   (nested up to [`status::MAX_SUBMODULE_DEPTH`]).
//! - Untracked: `git ls-files -o --exclude-standard -z` (every file, ignored ones excluded).
//!
//! Every tracked file's bytes are hashed on every check; the index's stat data is never
//! trusted (a case can rewrite it to hide a change).
//!
//! Deliberate refusals and differences from `git status`:
//! - **kiln-qual never runs repository filters.** A file whose committed blob only matches
//!   after a clean filter or end-of-line conversion (git-lfs pointers, `text=auto` or
//!   `core.autocrlf` with CRLF in the worktree, `ident`, `working-tree-encoding`) reads as
//!   modified, so such a repository is never clean.
//! - `assume-unchanged` and `skip-worktree` bits are not honoured (a sparse checkout reads as
//!   deleted files), and neither are `submodule.<name>.ignore` or `diff.ignoreSubmodules`.
//! - Tracked paths must be UTF-8 ([`parse_ls_files_stage`]).
//!
//! # Why spawn git rather than a library
//!
//! The repositories are the user's own checkouts with whatever index version, extensions,
//! object format, packs, alternates and worktree layout their git wrote; the installed git
//! reads them correctly by definition, and the queries are few and cheap. A library
//! reimplementation (gix, libgit2) would add a large dependency whose format coverage can lag
//! git's, and libgit2 would bring C and libc into crates that must not depend on them. What
//! git would *execute* is closed off above; the only comparison that needs file contents is
//! done here, in process.

#![forbid(unsafe_code)]

pub mod command;
pub mod status;
pub mod tracked;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use command::DEFAULT_DEADLINE;
pub use status::{blob_id, Change, ChangeKind, ObjectFormat};

/// Why a git query failed. Messages are lowercase and read after "failed to …: ".
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// No `git` qualifies to be run (see `qual-trusted`: resolved before any case ran, only
    /// root can change it, unchanged since).
    #[error("cannot run git {args}: {source}")]
    Program {
        /// The arguments after the fixed options.
        args: String,
        /// Why no program qualifies.
        #[source]
        source: qual_trusted::TrustError,
    },
    /// `git` could not be started.
    #[error("cannot run git {args}: {source}")]
    Spawn {
        /// The arguments after the fixed options.
        args: String,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
    /// Reading git's output or waiting for it failed.
    #[error("cannot read the output of git {args}: {source}")]
    Read {
        /// The arguments after the fixed options.
        args: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `git` exited non-zero (or was killed by a signal).
    #[error("git {args} exited with {status}: {stderr}")]
    Failed {
        /// The arguments after the fixed options.
        args: String,
        /// The exit status text.
        status: String,
        /// The last part of stderr.
        stderr: String,
    },
    /// `git` did not finish within the deadline and was killed.
    #[error("git {args} did not finish within {seconds} s and was killed")]
    Timeout {
        /// The arguments after the fixed options.
        args: String,
        /// The deadline.
        seconds: f64,
    },
    /// `git` printed more than the binding reads.
    #[error("git {args} printed more than {limit} bytes and was killed")]
    OutputTooLarge {
        /// The arguments after the fixed options.
        args: String,
        /// The stdout limit in bytes.
        limit: usize,
    },
    /// `git` printed something this binding cannot interpret.
    #[error("git {args} printed unexpected output: {detail}")]
    Unexpected {
        /// The arguments after the fixed options.
        args: String,
        /// What was wrong.
        detail: String,
    },
    /// A worktree file could not be read for the comparison (or was refused: see
    /// [`tracked`]).
    #[error("cannot read {path} in the worktree: {source}")]
    Worktree {
        /// The repository-relative path.
        path: String,
        /// Why.
        #[source]
        source: tracked::TrackedError,
    },
    /// An argument that the binding refuses to hand to git (it could be read as an option).
    #[error("refusing to pass {0:?} to git")]
    Argument(String),
}

/// One entry of `git ls-files -s -z`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The index mode text (`100644`, `100755`, `120000`, `160000`).
    pub mode: String,
    /// The object id (lowercase hex).
    pub object: String,
    /// The merge stage (0 unless the path is unmerged).
    pub stage: u8,
    /// The repository-relative path with `/` separators.
    pub path: String,
}

/// A repository worktree and the queries kiln-qual makes against it.
#[derive(Clone, Debug)]
pub struct Repo {
    root: PathBuf,
    deadline: Duration,
}

impl Repo {
    /// Binds the repository whose worktree top level is `root`. Nothing runs yet.
    pub fn new(root: impl Into<PathBuf>) -> Repo {
        Repo {
            root: root.into(),
            deadline: DEFAULT_DEADLINE,
        }
    }

    /// The same binding with another deadline for each git invocation.
    pub fn with_deadline(mut self, deadline: Duration) -> Repo {
        self.deadline = deadline;
        self
    }

    /// Another worktree with the same settings (a submodule).
    pub(crate) fn at(&self, root: PathBuf) -> Repo {
        Repo {
            root,
            deadline: self.deadline,
        }
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Finds the worktree top level that contains `dir` (`git rev-parse --show-toplevel`).
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        let args = ["rev-parse", "--show-toplevel"];
        let out = command::output(dir, &args, DEFAULT_DEADLINE)?;
        let text = String::from_utf8(out).map_err(|_| unexpected(&args, "path is not UTF-8"))?;
        let top = text.trim_end_matches('\n');
        if top.is_empty() {
            return Err(unexpected(&args, "empty top level"));
        }
        Ok(Repo::new(PathBuf::from(top)))
    }

    pub(crate) fn run(&self, args: &[&str]) -> Result<command::Finished, GitError> {
        command::run(&self.root, args, self.deadline)
    }

    pub(crate) fn output(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        command::output(&self.root, args, self.deadline)
    }

    /// Runs a yes/no query: exit 0 is yes, exit 1 is no, anything else an error.
    fn yes_no(&self, args: &[&str]) -> Result<bool, GitError> {
        let done = self.run(args)?;
        match done.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(command::failed(args, &done)),
        }
    }

    /// `HEAD` as a commit, checked to be 40 lowercase hex digits.
    pub fn head_commit(&self) -> Result<String, GitError> {
        let args = ["rev-parse", "--verify", "HEAD^{commit}"];
        let text = String::from_utf8_lossy(&self.output(&args)?)
            .trim()
            .to_owned();
        if !is_commit_id(&text) {
            return Err(unexpected(
                &args,
                &format!("HEAD is not a lowercase 40-character commit: {text:?}"),
            ));
        }
        Ok(text)
    }

    /// The object id of the commit at HEAD, `None` when HEAD is unborn or unresolvable.
    pub fn head_id(&self) -> Result<Option<String>, GitError> {
        let done = self.run(&["rev-parse", "--verify", "-q", "HEAD^{commit}"])?;
        let text = String::from_utf8_lossy(&done.stdout).trim().to_owned();
        Ok((done.status.success() && !text.is_empty()).then_some(text))
    }

    /// `git rev-parse --abbrev-ref HEAD` (the branch name, or `HEAD` when detached).
    pub fn abbrev_ref(&self) -> Result<String, GitError> {
        let out = self.output(&["rev-parse", "--abbrev-ref", "HEAD"])?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// The object format of the repository.
    pub fn object_format(&self) -> Result<ObjectFormat, GitError> {
        let args = ["rev-parse", "--show-object-format"];
        let out = self.output(&args)?;
        let text = String::from_utf8_lossy(&out);
        ObjectFormat::parse(&text)
            .ok_or_else(|| unexpected(&args, &format!("unknown object format {:?}", text.trim())))
    }

    /// `git config --get <key>` (repository configuration only): `None` when unset.
    pub fn config_value(&self, key: &str) -> Result<Option<String>, GitError> {
        check_argument(key)?;
        let args = ["config", "--get", key];
        let done = self.run(&args)?;
        match done.code() {
            Some(0) => Ok(Some(
                String::from_utf8_lossy(&done.stdout)
                    .trim_end_matches('\n')
                    .to_owned(),
            )),
            Some(1) => Ok(None),
            _ => Err(command::failed(&args, &done)),
        }
    }

    /// `git config --type=bool --get <key>`: `None` when unset.
    pub fn config_bool(&self, key: &str) -> Result<Option<bool>, GitError> {
        check_argument(key)?;
        let args = ["config", "--type=bool", "--get", key];
        let done = self.run(&args)?;
        match done.code() {
            Some(0) => match String::from_utf8_lossy(&done.stdout).trim() {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                other => Err(unexpected(&args, &format!("not a boolean: {other:?}"))),
            },
            Some(1) => Ok(None),
            _ => Err(command::failed(&args, &done)),
        }
    }

    /// Whether `commit` (a full lowercase hex object id; anything else never exists) names a
    /// commit object in this repository.
    pub fn has_commit(&self, commit: &str) -> Result<bool, GitError> {
        if !is_object_id(commit) {
            return Ok(false);
        }
        self.yes_no(&[
            "rev-parse",
            "--verify",
            "-q",
            &format!("{commit}^{{commit}}"),
        ])
    }

    /// Whether `commit` (a full lowercase hex object id) is reachable from `rev` (a branch,
    /// remote-tracking ref or commit): `git merge-base --is-ancestor`. A commit this
    /// repository does not have is not reachable; a `rev` that does not resolve is an error.
    pub fn is_ancestor(&self, commit: &str, rev: &str) -> Result<bool, GitError> {
        check_argument(rev)?;
        if !self.has_commit(commit)? {
            return Ok(false);
        }
        let target = format!("{rev}^{{commit}}");
        let resolved = self.yes_no(&["rev-parse", "--verify", "-q", &target])?;
        if !resolved {
            return Err(GitError::Unexpected {
                args: format!("rev-parse --verify -q {target}"),
                detail: format!("{rev} does not name a commit"),
            });
        }
        self.yes_no(&["merge-base", "--is-ancestor", commit, &target])
    }

    /// The upstream branch of the current branch (`origin/main`), `None` when HEAD is
    /// detached or its branch has no upstream (`git rev-parse --abbrev-ref @{upstream}`).
    pub fn upstream_branch(&self) -> Result<Option<String>, GitError> {
        let done = self.run(&[
            "rev-parse",
            "--abbrev-ref",
            "--symbolic-full-name",
            "@{upstream}",
        ])?;
        let text = String::from_utf8_lossy(&done.stdout).trim().to_owned();
        Ok((done.status.success() && !text.is_empty()).then_some(text))
    }

    /// The stored bytes of the blob at `path` in `commit` (`HEAD` or a full hex object id),
    /// `None` when the commit or the path is absent or the path is not a blob. The bytes are
    /// the object's, never filtered or converted.
    pub fn blob_at(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, GitError> {
        if commit != "HEAD" && !is_object_id(commit) {
            return Err(GitError::Argument(commit.to_owned()));
        }
        let spec = format!("{commit}:{path}");
        let args = ["rev-parse", "--verify", "-q", &spec];
        let found = self.run(&args)?;
        let id = match found.code() {
            Some(0) => String::from_utf8_lossy(&found.stdout).trim().to_owned(),
            Some(1) => return Ok(None),
            _ => return Err(command::failed(&args, &found)),
        };
        if !is_object_id(&id) {
            return Err(unexpected(&args, &format!("not an object id: {id:?}")));
        }
        let kind = self.output(&["cat-file", "-t", &id])?;
        if String::from_utf8_lossy(&kind).trim() != "blob" {
            return Ok(None);
        }
        self.output(&["cat-file", "blob", &id]).map(Some)
    }

    /// The committed bytes of `rel` at HEAD (see [`Repo::blob_at`]).
    pub fn show_head(&self, rel: &str) -> Result<Option<Vec<u8>>, GitError> {
        self.blob_at("HEAD", rel)
    }

    /// The index (`git ls-files -s -z`), in index order.
    pub fn index_entries(&self) -> Result<Vec<IndexEntry>, GitError> {
        parse_ls_files_stage(&self.output(&["ls-files", "-s", "-z"])?)
    }

    /// Whether `path` (literal, relative to the root) is tracked, or is a directory with
    /// tracked files (`git ls-files --error-unmatch`), whether or not it exists on disk.
    pub fn is_tracked(&self, path: &str) -> Result<bool, GitError> {
        let literal = format!(":(literal){path}");
        self.yes_no(&["ls-files", "--error-unmatch", "--", &literal])
    }

    /// Whether git ignores `path` (`git check-ignore -q`; the path need not exist).
    pub fn is_ignored(&self, path: &str) -> Result<bool, GitError> {
        // check-ignore matches its arguments as paths, but a leading `:` would still be read
        // as pathspec magic.
        let path = if path.starts_with(':') {
            format!("./{path}")
        } else {
            path.to_owned()
        };
        self.yes_no(&["check-ignore", "-q", "--", &path])
    }

    /// Every reason the worktree is not clean, sorted by path (empty means clean). See the
    /// crate docs for the rule.
    pub fn status(&self) -> Result<Vec<Change>, GitError> {
        status::changes(self, 0)
    }

    /// [`Repo::status`] as lines `<kind>: <path>` (e.g. `modified: src/lib.rs`,
    /// `untracked: notes.txt`, `staged: Cargo.toml`).
    pub fn status_lines(&self) -> Result<Vec<String>, GitError> {
        Ok(self.status()?.iter().map(Change::to_string).collect())
    }

    /// Whether the worktree is clean (see [`Repo::status`]).
    pub fn is_clean(&self) -> Result<bool, GitError> {
        Ok(self.status()?.is_empty())
    }
}

/// Parses `git ls-files -s -z` output (`<mode> <object> <stage>\t<path>\0` records).
pub fn parse_ls_files_stage(out: &[u8]) -> Result<Vec<IndexEntry>, GitError> {
    let bad = |detail: &str| unexpected(&["ls-files", "-s", "-z"], detail);
    let mut entries = Vec::new();
    for record in status::nul_records(out) {
        let tab = record
            .iter()
            .position(|b| *b == b'\t')
            .ok_or_else(|| bad("record without a tab"))?;
        let meta = std::str::from_utf8(&record[..tab]).map_err(|_| bad("mode is not UTF-8"))?;
        let mut fields = meta.split(' ');
        let (Some(mode), Some(object), Some(stage), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(bad("record without mode, object and stage"));
        };
        if !is_object_id(object) {
            return Err(bad("record without an object id"));
        }
        let stage = stage
            .parse::<u8>()
            .ok()
            .filter(|s| *s <= 3)
            .ok_or_else(|| bad("record with a bad stage"))?;
        let path = std::str::from_utf8(&record[tab + 1..])
            .map_err(|_| bad("tracked path is not UTF-8"))?
            .to_owned();
        entries.push(IndexEntry {
            mode: mode.to_owned(),
            object: object.to_owned(),
            stage,
            path,
        });
    }
    Ok(entries)
}

/// The directories git keeps the state of the worktree at `top` in, read from the files
/// themselves (no git is run): `top/.git`; for a linked worktree (`.git` is a file) also the
/// directory its `gitdir:` line names (`.git/worktrees/<name>` of the main repository) and
/// the common git directory that one's `commondir` names (the main repository's `.git`,
/// which holds its config, hooks and objects). Canonical paths of what exists; `top/.git`
/// always comes first. Everything here must be read-only to a case.
pub fn state_dirs(top: &Path) -> Vec<PathBuf> {
    use qual_json::file::read_regular_string;
    /// A `.git` file or `commondir` holds one path.
    const GIT_LINK_FILE_LIMIT: usize = 1 << 20;
    let dot_git = top.join(".git");
    let mut out = vec![dot_git.clone()];
    let Ok(text) = read_regular_string(&dot_git, GIT_LINK_FILE_LIMIT) else {
        return out;
    };
    let Some(dir) = text.lines().find_map(|l| l.strip_prefix("gitdir: ")) else {
        return out;
    };
    let Ok(gitdir) = std::fs::canonicalize(top.join(dir.trim())) else {
        return out;
    };
    if let Ok(common) = read_regular_string(&gitdir.join("commondir"), GIT_LINK_FILE_LIMIT) {
        if let Ok(common) = std::fs::canonicalize(gitdir.join(common.trim())) {
            if !out.contains(&common) {
                out.push(common);
            }
        }
    }
    if !out.iter().any(|d| gitdir.starts_with(d)) {
        out.push(gitdir);
    }
    out
}

/// Whether `s` is 40 lowercase hex digits (a SHA-1 commit id).
pub fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && is_lower_hex(s)
}

/// Whether `s` is a full lowercase hex object id (40 or 64 digits).
pub fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && is_lower_hex(s)
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn unexpected(args: &[&str], detail: &str) -> GitError {
    GitError::Unexpected {
        args: args.join(" "),
        detail: detail.to_owned(),
    }
}

/// A config key is passed as an argument: it must not look like an option.
fn check_argument(arg: &str) -> Result<(), GitError> {
    if arg.is_empty() || arg.starts_with('-') {
        return Err(GitError::Argument(arg.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stage_records_with_tabs_and_spaces_in_paths() {
        let raw = b"100644 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 0\ta b.txt\x00100755 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 2\tbin/run\tx\x00";
        let e = parse_ls_files_stage(raw).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].mode, "100644");
        assert_eq!(e[0].object, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!((e[0].stage, e[0].path.as_str()), (0, "a b.txt"));
        assert_eq!((e[1].stage, e[1].path.as_str()), (2, "bin/run\tx"));
        assert!(parse_ls_files_stage(b"100644 abc 0 nopath\0").is_err());
        assert!(parse_ls_files_stage(b"100644 abc 0\tshort-id\0").is_err());
    }

    #[test]
    fn commit_ids_are_lowercase_hex_of_forty() {
        assert!(is_commit_id("8e419e43051b83c001c0bc3a830aad559a5bf345"));
        assert!(!is_commit_id("8E419E43051B83C001C0BC3A830AAD559A5BF345"));
        assert!(!is_commit_id("8e419e4"));
        assert!(is_object_id(&"a".repeat(64)));
        assert!(!is_object_id("--output=x"));
    }

    #[test]
    fn option_like_arguments_are_refused() {
        let r = Repo::new("/nonexistent");
        assert!(matches!(
            r.config_value("--add"),
            Err(GitError::Argument(_))
        ));
        assert!(matches!(
            r.blob_at("--output=/tmp/x", "a"),
            Err(GitError::Argument(_))
        ));
        assert!(!r.has_commit("--all").unwrap());
    }
}
