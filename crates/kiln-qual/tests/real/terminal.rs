//! Progress and Ctrl-C on a real terminal, and completion in real shells.
//!
//! - `run`, `bench` and `campaign` each run once with stderr on a pipe (the bytes must hold
//!   no progress bar: no bar text, no carriage return, no escape sequence) and once inside
//!   tmux, a real pseudo-terminal, where the bar must appear on the screen; then Ctrl-C is
//!   typed (tmux sends the terminal's interrupt character, so the line discipline signals
//!   the foreground process as a user's Ctrl-C does) and the command must exit 130, with
//!   what it had finished still on disk (`bench` its CSV, `campaign` its summary; `run`
//!   removes its run data by contract and writes no receipt).
//! - `-q` draws no bar on a terminal (the screen is sampled while `run` runs).
//! - Help is coloured on a terminal, and not with `NO_COLOR` or `--color never`.
//! - The completion scripts are loaded into real bash (the generated function asked for the
//!   words after `kiln-qual receipt ch` and `kiln-qual bench --concu`), real zsh (typed with
//!   Tab in tmux, since zsh completes only inside its line editor) and real fish
//!   (`complete -C`), for a second-level subcommand and a flag.
//!
//! Each tmux session runs on its own socket in a temporary directory (never the user's
//! server) and is killed on drop. The trials need tmux (and zsh, fish); missing, they are
//! reported ignored, and fail under CI=true (`.ci/run` installs them).

use crate::common::{free_port, git, mock_server, repo_root, KilledOnDrop};
use qual_test_fixtures::harness::Trial;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn kq() -> &'static str {
    env!("CARGO_BIN_EXE_kiln-qual")
}

/// `Ok` when `program` runs (`program --version` or `-V` exits 0).
fn needs_program(program: &str) -> Result<(), String> {
    let runs = |flag: &str| {
        Command::new(program)
            .arg(flag)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if runs("-V") || runs("--version") {
        Ok(())
    } else {
        Err(format!(
            "needs {program} (not found; apt-get install {program})"
        ))
    }
}

/// One tmux server on a private socket with one pane running `argv` under `bash -c`, which
/// writes its exit status to a file (tmux's own `pane_dead_status` is sometimes never set
/// when the pane's terminal closes before its process is reaped). bash waits for the
/// command and, as it does for any foreground command that handled the SIGINT itself
/// (exited rather than died of it), goes on to write the status.
struct Tmux {
    dir: tempfile::TempDir,
    sock: PathBuf,
}

impl Tmux {
    fn start(argv: &[&str], cwd: &Path) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("tmux.conf");
        std::fs::write(&conf, "set -g remain-on-exit on\nset -g status off\n").unwrap();
        let sock = dir.path().join("sock");
        let status = dir.path().join("status");
        let t = Tmux { dir, sock };
        let mut c = t.cmd();
        c.arg("-f").arg(&conf);
        c.args(["new-session", "-d", "-x", "160", "-y", "40", "-c"]);
        c.arg(cwd)
            .args(["--", "bash", "--norc", "--noprofile", "-c"]);
        c.arg("\"$@\"; echo $? > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"");
        c.arg(&status).args(argv);
        let st = c.status().unwrap();
        assert!(st.success(), "tmux did not start");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.sock);
        c
    }

    fn query(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen and its scrollback: when the pane's command exits, tmux writes "Pane is
    /// dead" on the last row with a line feed, which scrolls the first row off the screen.
    fn screen(&self) -> String {
        self.query(&["capture-pane", "-p", "-J", "-S", "-"])
    }

    /// Waits (up to two minutes) until the screen satisfies `pred`; returns it.
    fn wait_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "{what} never appeared:\n{s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend(keys);
        assert!(self.cmd().args(&args).status().unwrap().success());
    }

    /// Waits (up to two minutes) for the pane's command to exit; its exit status.
    fn exit_status(&self) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(120);
        let path = self.dir.path().join("status");
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                return text.trim().parse().unwrap();
            }
            if Instant::now() >= deadline {
                // What still runs, for the failure message: any process of this build.
                let ps = Command::new("ps")
                    .args(["-eo", "pid,ppid,pgid,sid,stat,args"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                let ours: Vec<&str> = ps.lines().filter(|l| l.contains(kq())).collect();
                panic!(
                    "the command did not exit:\n{}\n{}",
                    self.screen(),
                    ours.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

/// Runs `argv` (stdin closed, stdout and stderr on pipes); asserts its stderr holds no
/// progress (`marker` is the bar's text) and returns (exit code, stderr).
fn on_a_pipe(args: &[&str], cwd: &Path, marker: &str) -> (i32, String) {
    let out = Command::new(kq())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains(marker), "progress on a pipe:\n{err}");
    assert!(
        !err.contains('\r') && !err.contains('\u{1b}'),
        "terminal control bytes on a pipe:\n{err:?}"
    );
    (out.status.code().unwrap_or(-1), err)
}

/// Runs `args` in tmux, waits for the bar (`marker` and a `N/M` count), types Ctrl-C and
/// returns the exit status and the terminal (its screen may lag the exit by a moment: wait
/// for text with `wait_screen`).
fn interrupted_on_a_terminal(args: &[&str], cwd: &Path, marker: &str) -> (i32, Tmux) {
    let mut argv = vec![kq()];
    argv.extend(args);
    let t = Tmux::start(&argv, cwd);
    t.wait_screen("the progress bar", |s| {
        s.lines().any(|l| counting(l, marker))
    });
    t.send(&["C-c"]);
    let code = t.exit_status();
    (code, t)
}

/// Whether `line` shows a bar counting `N/M marker` with a known total (M > 0): the work has
/// started, not only the command.
fn counting(line: &str, marker: &str) -> bool {
    let Some(i) = line.find(marker) else {
        return false;
    };
    let count = line[..i].trim_end().rsplit(' ').next().unwrap_or("");
    matches!(count.split_once('/'), Some((_, total)) if total.parse::<u64>().is_ok_and(|t| t > 0))
}

/// A repository whose workload runs three cases of `sleep 2`.
fn sleeping_repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let src = repo_root().join("qualification/workloads/cpu-smoke-v1.json");
    let mut w: serde_json::Value = serde_json::from_slice(&std::fs::read(src).unwrap()).unwrap();
    let case = w["variants"][0]["cases"][0].clone();
    let cases: Vec<serde_json::Value> = (1..=3)
        .map(|i| {
            let mut c = case.clone();
            c["id"] = format!("sleep-{i}").into();
            c["command"] = serde_json::json!(["sleep", "2"]);
            c["output_assertions"] = serde_json::json!([]);
            c
        })
        .collect();
    w["variants"][0]["cases"] = cases.into();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::write(
        root.join("qualification/workloads/cpu-smoke-v1.json"),
        serde_json::to_vec_pretty(&w).unwrap(),
    )
    .unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "sleeping workload"]);
    d
}

fn run_args(out: &str) -> Vec<String> {
    [
        "run",
        "qualification/workloads/cpu-smoke-v1.json",
        "--variant",
        "cpu",
        "--host-id",
        "tty-host",
        "--output",
        out,
        "--term-grace-seconds",
        "1",
    ]
    .map(String::from)
    .to_vec()
}

fn run_progress_and_ctrl_c() {
    let d = sleeping_repo();
    let root = d.path();
    let piped = run_args(".qualification/receipts/piped.json");
    let piped: Vec<&str> = piped.iter().map(String::as_str).collect();
    let (code, err) = on_a_pipe(&piped, root, "case executions");
    assert_eq!(code, 0, "{err}");
    let tty = run_args(".qualification/receipts/tty.json");
    let tty: Vec<&str> = tty.iter().map(String::as_str).collect();
    let (code, t) = interrupted_on_a_terminal(&tty, root, "case executions");
    assert_eq!(code, 130, "{}", t.screen());
    t.wait_screen("the interruption", |s| s.contains("run interrupted"));
    assert!(!root.join(".qualification/receipts/tty.json").exists());
    assert!(root.join(".qualification/receipts/piped.json").is_file());
}

/// `-q` on a terminal: the screen, sampled until the run ends, never shows the bar.
fn quiet_draws_no_progress_on_a_terminal() {
    let d = sleeping_repo();
    let args = run_args(".qualification/receipts/quiet.json");
    let mut argv = vec![kq(), "-q"];
    argv.extend(args.iter().map(String::as_str));
    let t = Tmux::start(&argv, d.path());
    let path = t.dir.path().join("status");
    let mut samples = 0;
    while !path.exists() {
        let s = t.screen();
        assert!(!s.contains("case executions"), "a bar under -q:\n{s}");
        samples += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(t.exit_status(), 0, "{}", t.screen());
    assert!(samples > 10, "the run ended before the screen was sampled");
    t.wait_screen("the verdict", |s| s.contains("verdict: passed"));
}

fn mock(itl_ms: &str) -> (KilledOnDrop, u16) {
    mock_server(kq(), &["--itl-ms", itl_ms])
}

fn bench_progress_and_ctrl_c() {
    let d = tempfile::tempdir().unwrap();
    let tok = crate::bench::word_tokenizer(d.path());
    let (_m, port) = mock("20");
    let url = format!("http://127.0.0.1:{port}");
    let args = |requests: &str, csv: &str| -> Vec<String> {
        [
            "bench",
            "--url",
            &url,
            "--tokenizer",
            tok.to_str().unwrap(),
            "--input-tokens",
            "8",
            "--output-tokens",
            "16",
            "--concurrency",
            "1",
            "--requests",
            requests,
            "--csv",
            csv,
        ]
        .map(String::from)
        .to_vec()
    };
    let piped = args("4", "piped.csv");
    let piped: Vec<&str> = piped.iter().map(String::as_str).collect();
    let (code, err) = on_a_pipe(&piped, d.path(), "requests ·");
    // The validity gate may refuse timing on a busy machine (exit 1, outputs still written).
    assert!(code == 0 || err.contains("validity gate"), "{code}: {err}");
    let tty = args("400", "tty.csv");
    let tty: Vec<&str> = tty.iter().map(String::as_str).collect();
    let (code, t) = interrupted_on_a_terminal(&tty, d.path(), "requests ·");
    assert_eq!(code, 130, "{}", t.screen());
    let csv = std::fs::read_to_string(d.path().join("tty.csv")).unwrap();
    assert!(
        csv.lines().count() >= 2,
        "the interrupted point's CSV: {csv}"
    );
}

fn campaign_args(dir: &Path, out: &Path, repeats: &str) -> Vec<String> {
    [
        "campaign",
        "--engine",
        "mock",
        "--launch",
        dir.join("launch.json").to_str().unwrap(),
        "--campaign-id",
        "tty-campaign",
        "--prompt-set-id",
        "tty-prompts",
        "--profiles",
        "greedy-short",
        "--sizes",
        "1",
        "--repeats",
        repeats,
        "--max-tokens",
        "16",
        "--memory-limit-bytes",
        "1099511627776",
        "--memory-source",
        "process-tree",
        "--out-dir",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

fn campaign_progress_and_ctrl_c() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let port = free_port();
    let recipe = serde_json::json!({
        "schema": "kiln-qual.serve-launch.v1",
        "id": "tty-campaign-mock",
        "command": [kq(), "mock-server", "--port", port.to_string(), "--itl-ms", "30"],
        "working_directory": ".",
        "port": port,
        "log_directory": "logs",
        "readiness_poll_interval_ms": 10,
        "startup_timeout_seconds": 10,
        "shutdown_timeout_seconds": 5,
        "acceptable_exit_codes": [0],
    });
    std::fs::write(dir.join("launch.json"), recipe.to_string()).unwrap();
    for name in ["piped", "tty"] {
        std::fs::create_dir(dir.join(name)).unwrap();
    }
    let piped = campaign_args(dir, &dir.join("piped"), "1");
    let piped: Vec<&str> = piped.iter().map(String::as_str).collect();
    let (code, err) = on_a_pipe(&piped, dir, "rows ·");
    assert!(code == 0 || code == 1, "{code}: {err}");
    let tty = campaign_args(dir, &dir.join("tty"), "200");
    let tty: Vec<&str> = tty.iter().map(String::as_str).collect();
    let (code, t) = interrupted_on_a_terminal(&tty, dir, "rows ·");
    assert_eq!(code, 130, "{}", t.screen());
    let summary = dir
        .join("tty")
        .join(qual_campaign::records::summary_name("mock"));
    assert!(
        summary.is_file(),
        "no summary after Ctrl-C:\n{}",
        t.screen()
    );
}

fn help_is_coloured_on_a_terminal_unless_no_color() {
    let d = tempfile::tempdir().unwrap();
    for (argv, coloured) in [
        (vec![kq(), "--help"], true),
        (vec!["env", "NO_COLOR=1", kq(), "--help"], false),
        (vec![kq(), "--color", "never", "--help"], false),
    ] {
        let t = Tmux::start(&argv, d.path());
        assert_eq!(t.exit_status(), 0);
        // `-e`: with its attributes as escape sequences; `-S -`: the scrollback too. The last
        // line of the help (`--version`) may reach the screen a moment after the exit.
        let deadline = Instant::now() + Duration::from_secs(60);
        let screen = loop {
            let screen = t.query(&["capture-pane", "-p", "-e", "-S", "-"]);
            if screen.contains("Print version") || Instant::now() >= deadline {
                break screen;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(screen.contains("Usage:"), "{screen}");
        assert_eq!(screen.contains('\u{1b}'), coloured, "{argv:?}: {screen:?}");
    }
}

fn completion_script(shell: &str) -> String {
    let out = Command::new(kq())
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

fn bash_completes_subcommands_and_flags() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("kiln-qual.bash");
    std::fs::write(&script, completion_script("bash")).unwrap();
    let probe = r#"source "$1"
ask() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  COMPREPLY=(); _kiln__qual kiln-qual "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  echo "${COMPREPLY[*]}"; }
ask kiln-qual receipt ch
ask kiln-qual bench --concu
ask kiln-qual campaign ver
"#;
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", probe, "probe"])
        .arg(&script)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, ["check", "--concurrency", "verify"], "{text}");
}

fn zsh_completes_subcommands_and_flags() {
    let d = tempfile::tempdir().unwrap();
    let fpath = d.path().join("zfunc");
    std::fs::create_dir(&fpath).unwrap();
    std::fs::write(fpath.join("_kiln-qual"), completion_script("zsh")).unwrap();
    let zshrc = d.path().join(".zshrc");
    std::fs::write(
        &zshrc,
        format!(
            "fpath=({} $fpath)\nautoload -Uz compinit\ncompinit -u -d {}/zcompdump\nPS1='ready> '\n",
            fpath.display(),
            d.path().display()
        ),
    )
    .unwrap();
    let home = d.path().to_str().unwrap();
    let t = Tmux::start(&["env", &format!("ZDOTDIR={home}"), "zsh", "-i"], d.path());
    t.wait_screen("the zsh prompt", |s| s.contains("ready>"));
    t.send(&["kiln-qual receipt ch", "Tab"]);
    t.wait_screen("receipt check", |s| s.contains("kiln-qual receipt check"));
    t.send(&["C-u", "kiln-qual bench --concu", "Tab"]);
    t.wait_screen("--concurrency", |s| {
        s.contains("kiln-qual bench --concurrency")
    });
}

fn fish_completes_subcommands_and_flags() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("kiln-qual.fish");
    std::fs::write(&script, completion_script("fish")).unwrap();
    let out = Command::new("fish")
        .args(["--no-config", "-c"])
        .arg(format!(
            "source {}; complete -C 'kiln-qual receipt ch'; complete -C 'kiln-qual bench --concu'",
            script.display()
        ))
        .env("HOME", d.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap_or(""))
        .collect();
    assert_eq!(words, ["check", "--concurrency"], "{text}");
}

pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new("run_progress_and_ctrl_c", run_progress_and_ctrl_c).needs(needs_program("tmux")),
        Trial::new("bench_progress_and_ctrl_c", bench_progress_and_ctrl_c)
            .needs(needs_program("tmux")),
        Trial::new("campaign_progress_and_ctrl_c", campaign_progress_and_ctrl_c)
            .needs(needs_program("tmux")),
        Trial::new(
            "quiet_draws_no_progress_on_a_terminal",
            quiet_draws_no_progress_on_a_terminal,
        )
        .needs(needs_program("tmux")),
        Trial::new(
            "help_is_coloured_on_a_terminal_unless_no_color",
            help_is_coloured_on_a_terminal_unless_no_color,
        )
        .needs(needs_program("tmux")),
        Trial::new(
            "bash_completes_subcommands_and_flags",
            bash_completes_subcommands_and_flags,
        )
        .needs(needs_program("bash")),
        Trial::new(
            "zsh_completes_subcommands_and_flags",
            zsh_completes_subcommands_and_flags,
        )
        .needs(needs_program("zsh"))
        .needs(needs_program("tmux")),
        Trial::new(
            "fish_completes_subcommands_and_flags",
            fish_completes_subcommands_and_flags,
        )
        .needs(needs_program("fish")),
    ]
}
