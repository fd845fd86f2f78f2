//! The HTML report in a real browser: headless Chromium loads the page of a generated
//! multi-host, multi-backend, multi-commit receipt set (with run and serving evidence), dumps
//! the DOM and takes screenshots at 1280 px and at phone width. The test requires: no console
//! message at all (the page has no script, so any message is an error such as a refused fetch),
//! every `<svg>` with a `<title>`, a `<desc>` and at least one non-empty `<path>`; the trend
//! charts' rules (issue 25): value axes from zero and never below it, distinct labels for the
//! two runs of each commit, runs the validity gate refused drawn as open diamonds and named in
//! the legend; and every chart label at least 11 CSS px at 1280 px and at a 390 px phone,
//! measured by the browser (a copy of the page without its Content-Security-Policy, with a
//! script that computes each `<text>`'s font size × its chart's scale).
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

/// The trend charts' rules, on the DOM the browser built.
fn trend_rules(dom: &str) {
    let trends: Vec<&str> = dom
        .split("<svg")
        .skip(1)
        .map(|s| s.split("</svg>").next().unwrap_or(""))
        .filter(|s| s.contains("across runs</title>"))
        .collect();
    assert!(!trends.is_empty());
    for t in &trends {
        // Every y tick label is ≥ 0 and one of them is 0.
        let ticks: Vec<f64> = t
            .split("class=\"ytick\"")
            .skip(1)
            .filter_map(|x| x.split('>').nth(1))
            .filter_map(|x| x.split('<').next())
            .map(|x| x.replace(',', "").parse::<f64>().expect("numeric tick"))
            .collect();
        assert!(ticks.iter().all(|v| *v >= 0.0), "negative tick: {ticks:?}");
        assert!(ticks.contains(&0.0), "axis without zero: {ticks:?}");
    }
    let failures = trends
        .iter()
        .find(|t| t.contains("requests_failed"))
        .expect("a failure-count trend");
    assert!(failures.contains("text-anchor=\"end\">0</text>"));
    assert!(trends
        .iter()
        .any(|t| t.contains("·1<") && t.contains("·2<")));
    let refused = trends
        .iter()
        .filter(|t| t.contains("class=\"refusedmark\" d=\"M"))
        .count();
    assert!(refused > 0, "no refused run drawn");
    assert!(trends
        .iter()
        .filter(|t| t.contains("class=\"refusedmark\" d=\"M"))
        .all(|t| t.contains(">refused by the validity gate</text>")));
}

/// The page without its Content-Security-Policy and with a script that records the smallest
/// rendered chart text (font size × the chart's scale, CSS px) on `<body>`. Headless Chromium
/// lays `--dump-dom` out at least 500 px wide, so a narrower `width` is applied to the body
/// (the narrow-screen style, `max-width: 640px`, applies at 500 px as at a phone's width).
/// The smallest chart text `html` renders at 1280 and 390 px wide is at least 11 px (measured
/// by the probe page, written to `dir/NAME-probe-WIDTH.html`).
fn chart_text_is_readable(browser: &Path, profile: &Path, (dir, name): (&Path, &str), html: &str) {
    for width in [1280, 390] {
        let probe = dir.join(format!("{name}-probe-{width}.html"));
        std::fs::write(&probe, probe_page(html, width)).expect("write probe page");
        let (dom, _) = run(
            browser,
            &["--dump-dom", &format!("--window-size={width},3000")],
            &probe,
            profile,
        );
        let min = dom
            .split("data-min-text-px=\"")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .and_then(|t| t.parse::<f64>().ok())
            .expect("the probe wrote its measurement");
        eprintln!("smallest chart text at {width} px: {min:.2} px");
        assert!(min >= 11.0, "chart text is {min:.2} px at {width} px width");
    }
}

fn probe_page(html: &str, width: u32) -> String {
    let csp_start = html
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .expect("csp");
    let csp_end = csp_start + html[csp_start..].find('>').expect("csp end") + 1;
    let script = "<script>let m=1e9;for(const t of document.querySelectorAll('svg.chart text')){const s=t.ownerSVGElement;const k=s.getBoundingClientRect().width/s.viewBox.baseVal.width;const f=parseFloat(getComputedStyle(t).fontSize)*k;if(f>0)m=Math.min(m,f);}document.body.setAttribute('data-min-text-px',String(m));</script>";
    let narrow = if width < 500 {
        format!("<style>body{{max-width:{width}px !important;margin:0 !important}}</style>")
    } else {
        String::new()
    };
    let page = format!("{}{}", &html[..csp_start], &html[csp_end..]);
    page.replacen("</head>", &format!("{narrow}</head>"), 1)
        .replace("</body>", &format!("{script}</body>"))
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
        runs_per_commit: 2,
        validity_refused_every: 5,
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
    trend_rules(&dom);
    chart_text_is_readable(&browser, &profile, (&dir, "report"), &html);
    // The charts from the trends on, for the screenshots (the same page with what precedes the
    // trends hidden).
    let charts = dir.join("report-charts.html");
    std::fs::write(
        &charts,
        html.replacen(
            "</head>",
            "<style>body>:has(~ #trends){display:none}</style></head>",
            1,
        ),
    )
    .expect("write charts page");
    for (name, size, shown) in [
        ("desktop-1280.png", "1280,3000", &page),
        ("phone-390.png", "390,3000", &page),
        ("charts-desktop-1280.png", "1280,2400", &charts),
        ("charts-phone-390.png", "390,2400", &charts),
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
            shown,
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

/// Every chart in the DOM has its accessible name, its description and drawn data.
fn charts_are_drawn(dom: &str, html: &str, at_least: usize) {
    let svgs: Vec<&str> = dom.split("<svg").skip(1).collect();
    assert!(
        svgs.len() >= at_least,
        "only {} charts in the DOM",
        svgs.len()
    );
    assert_eq!(svgs.len(), html.matches("<svg").count());
    for (i, svg) in svgs.iter().enumerate() {
        let body = svg.split("</svg>").next().unwrap_or("");
        assert!(body.contains("<title"), "chart {i} has no title");
        assert!(body.contains("<desc"), "chart {i} has no desc");
        assert!(
            body.contains("class=\"line\" d=\"M") || body.contains("class=\"marker\" d=\"M"),
            "chart {i} draws no data"
        );
    }
}

/// The report of `kiln-qual bench` documents: a real closed-loop sweep (c = 1, 2, 4, written
/// by `kiln-qual bench` against the mock server: `tests/fixtures/bench-sweep.json`) and a
/// generated SLA search with a refused run and failed requests, in headless Chromium: no
/// console message, every chart titled, described and drawn (the sweep charts, per load point
/// the CDFs and the request timeline), chart text at least 11 CSS px at 1280 px and at a
/// 390 px phone, and screenshots kept beside the receipt report's.
pub fn bench_report_renders_in_chromium() {
    use qual_test_fixtures::synth::bench::{bench_document, BenchOptions};
    let browser = chromium().expect("checked by the harness");
    let tmp = tempfile::tempdir().expect("tempdir");
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-sweep.json");
    let search = tmp.path().join("search.json");
    let doc = bench_document(&BenchOptions {
        levels: vec![8, 1, 4, 6, 5],
        refused: vec![3],
        failed: vec![4],
        search: Some((Some(4.0), Some(5.0))),
        verdict: serde_json::json!({"status": "server_failed", "reasons": [
            "c=5 run 0: 10 of 40 measured requests failed (10 missing_done), more than the allowed failure rate 0"
        ]}),
        ..BenchOptions::default()
    });
    std::fs::write(&search, doc.to_string()).expect("write search");
    let set = qual_report::collect(&[sweep, search]);
    assert!(set.refused.is_empty(), "{:?}", set.refused);
    assert_eq!(set.benches.len(), 2);
    let html = qual_report::html::render(&set);
    assert!(html.contains("knee 4, first failing 5"));
    let dir = artifacts();
    let page = dir.join("bench-report.html");
    std::fs::write(&page, &html).expect("write page");
    let profile = tmp.path().join("profile");
    let (dom, stderr) = run(&browser, &["--dump-dom"], &page, &profile);
    let problems = console_problems(&stderr);
    assert!(
        problems.is_empty(),
        "console messages:\n{}",
        problems.join("\n")
    );
    // Two documents × (4 sweep charts, and per point 3 CDFs and a timeline): 3 + 5 points.
    charts_are_drawn(&dom, &html, 2 * 4 + 8 * 4);
    assert!(
        dom.contains("class=\"refusedmark\" d=\"M"),
        "refused point not drawn"
    );
    for title in [
        "Output throughput against concurrency",
        "Latency percentiles against concurrency",
        "Request timeline of c=4 r0",
        "TTFT distribution (CDF)",
        "ITL distribution (CDF)",
        "E2E distribution (CDF)",
    ] {
        assert!(dom.contains(&format!(">{title}</title>")), "no {title}");
    }
    chart_text_is_readable(&browser, &profile, (&dir, "bench-report"), &html);
    for (name, size) in [
        ("bench-desktop-1280.png", "1280,4000"),
        ("bench-phone-390.png", "390,4000"),
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
    eprintln!("bench report artifacts in {}", dir.display());
}
