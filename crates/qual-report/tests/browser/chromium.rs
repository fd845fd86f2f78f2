//! The HTML report in a real browser: headless Chromium loads the page of a generated
//! multi-host, multi-backend, multi-commit receipt set (with run and serving evidence), dumps
//! the DOM and takes screenshots at 1280 px and at phone width. The test requires: no console
//! message at all (the page has no script, so any message is an error such as a refused fetch),
//! every `<svg>` with a `<title>`, a `<desc>` and at least one non-empty `<path>`.
//!
//! The page and screenshots are kept in `target/report-browser/` (or `$REPORT_ARTIFACTS_DIR`)
//! for CI to upload. Chromium comes from the distribution (`scripts/setup-browser`); without
//! it the trial is reported ignored (failed under `CI=true`) by `main.rs`'s harness.

use qual_test_fixtures::synth::{self, Options};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn chromium() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

fn artifacts() -> PathBuf {
    let dir = std::env::var_os("REPORT_ARTIFACTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-browser")
        });
    std::fs::create_dir_all(&dir).expect("artifact dir");
    dir
}

fn run(browser: &Path, args: &[&str], page: &Path, profile: &Path) -> (String, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("start chromium");
    assert!(
        out.status.success(),
        "chromium failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn console_problems(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            l.contains("CONSOLE")
                || l.contains("Uncaught")
                || l.contains("Refused to")
                || l.contains("Content Security Policy")
        })
        .collect()
}

pub fn html_report_renders_in_chromium() {
    let browser = chromium().expect("checked by the harness");
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        hosts: vec!["host-a".into(), "host-b".into(), "host-c".into()],
        backends: vec!["cpu".into(), "rocm".into()],
        commits: 4,
        ..Options::default()
    };
    synth::write_set(tmp.path(), &opts).expect("generate");
    let set = qual_report::collect(&[tmp.path().join("qualification/receipts")]);
    assert!(set.refused.is_empty());
    let html = qual_report::html::render(&set);
    let dir = artifacts();
    let page = dir.join("report.html");
    std::fs::write(&page, &html).expect("write page");
    let profile = tmp.path().join("profile");

    let (dom, stderr) = run(&browser, &["--dump-dom"], &page, &profile);
    let problems = console_problems(&stderr);
    assert!(
        problems.is_empty(),
        "console messages:\n{}",
        problems.join("\n")
    );
    let svgs: Vec<&str> = dom.split("<svg").skip(1).collect();
    assert!(svgs.len() >= 20, "only {} charts in the DOM", svgs.len());
    assert_eq!(svgs.len(), html.matches("<svg").count());
    for (i, svg) in svgs.iter().enumerate() {
        let body = svg.split("</svg>").next().unwrap_or("");
        assert!(body.contains("<title"), "chart {i} has no title");
        assert!(body.contains("<desc"), "chart {i} has no desc");
        let paths = body.matches("<path").count();
        let empty = body.matches(" d=\"\"").count();
        assert!(paths > empty && paths > 1, "chart {i} has no drawn path");
        assert!(
            body.contains("class=\"line\" d=\"M") || body.contains("class=\"marker\" d=\"M"),
            "chart {i} draws no data"
        );
    }
    for (name, size) in [
        ("desktop-1280.png", "1280,3000"),
        ("phone-390.png", "390,3000"),
    ] {
        let shot = dir.join(name);
        let _ = std::fs::remove_file(&shot);
        let (_, stderr) = run(
            &browser,
            &[
                &format!("--screenshot={}", shot.display()),
                &format!("--window-size={size}"),
                "--hide-scrollbars",
            ],
            &page,
            &profile,
        );
        let problems = console_problems(&stderr);
        assert!(
            problems.is_empty(),
            "console messages:\n{}",
            problems.join("\n")
        );
        let len = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "{name} is {len} bytes");
    }
    eprintln!("browser artifacts in {}", dir.display());
}
