//! Client headroom and timing accuracy against the mock server (prints, never asserts).
//!
//! 1. Streamed content events per second: the full load generator (SSE parsing, per-event
//!    timestamps, per-request records) pinned to CPU 0, against the zero-delay mock (one
//!    buffer of 1000 content events per response) pinned to CPU 1 when `taskset` exists.
//!    Baseline measured in the same run: a bare reader on the same pinned CPU that sends the
//!    same requests over a raw socket and only counts `data:` lines (no HTTP library, no JSON,
//!    no records) — the floor of reading those bytes; the ratio is ours / bare. (Target
//!    ≥ 300 000 events/s, printed beside, never as a ratio.)
//! 2. Non-streamed requests per second: `GET /v1/models` on 64 keep-alive connections from one
//!    pinned thread. Baseline measured in the same run: the same 64 connections driven by a
//!    bare tokio loop (fixed request bytes, `Content-Length` framing, no hyper), and
//!    `wrk -t1 -c64` when installed (skipped with a message otherwise). (Target ≥ 10 000
//!    req/s, printed beside.)
//! 3. Timing error distribution: measured minus injected TTFT (20 ms) and ITL (5 ms) at
//!    concurrency 1 and 64.
//!
//! Run with `cargo bench -p qual-serve --bench serve_headroom`.

use qual_serve::client::{self, StreamRules};
use qual_serve::corpus::{Corpus, CorpusEntry};
use qual_serve::load::{self, Arrival, LoadSpec};
use qual_serve::metrics::percentile_type7;
use qual_serve::record::{Endpoint, Phase};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The mock server program `qual-serve-mock`, a bin of `qual-test-fixtures` found next to this
/// executable: `cargo test --workspace` builds it; a run of this crate alone needs
/// `cargo build -p qual-test-fixtures --bins` first (cargo builds no bin of a dependency).
fn mock() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path = qual_test_fixtures::fixture_binary("qual-serve-mock")
            .expect("qual-serve-mock is not built: run cargo build -p qual-test-fixtures --bins");
        path.to_str().expect("a UTF-8 target directory").to_owned()
    })
}

fn which(name: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
            .map(|c| c.display().to_string())
    })
}

struct Mock(Child, u16);

impl Drop for Mock {
    fn drop(&mut self) {
        // SAFETY: sending SIGTERM to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn start_mock(flags: &[&str]) -> Mock {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut args: Vec<String> = vec!["--port".into(), port.to_string()];
    args.extend(flags.iter().map(|s| s.to_string()));
    let mut cmd = match which("taskset") {
        Some(t) => {
            let mut c = Command::new(t);
            c.arg("-c").arg("1").arg(mock());
            c
        }
        None => Command::new(mock()),
    };
    let child = cmd
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mock");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "mock did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    Mock(child, port)
}

fn corpus(max_tokens: u64) -> Corpus {
    Corpus {
        entries: (0..16)
            .map(|i| CorpusEntry {
                id: format!("b{i}"),
                endpoint: if i % 2 == 0 {
                    Endpoint::Chat
                } else {
                    Endpoint::Completions
                },
                prompt: format!("benchmark prompt {i}"),
                max_tokens: max_tokens + i % 4 * (max_tokens / 8),
                temperature: None,
                top_p: None,
                seed: None,
                ignore_eos: None,
            })
            .collect(),
        sha256: String::new(),
    }
}

fn spec(port: u16, concurrency: usize, requests: usize) -> LoadSpec {
    LoadSpec {
        addr: ([127, 0, 0, 1], port).into(),
        model: "kiln-qual-mock".into(),
        arrival: Arrival::ClosedLoop { concurrency },
        warmup: concurrency,
        measured: requests,
        seed: 1,
        max_in_flight: 1024,
        request_timeout: Duration::from_secs(60),
        rules: StreamRules {
            allow_missing_usage: false,
            allow_missing_done: false,
        },
        pin_cpu: Some(0),
        realtime_reader: false,
    }
}

fn streamed_events_per_second() {
    let mock = start_mock(&["--output-tokens", "1000"]);
    let c = corpus(1000);
    let epoch = Instant::now();
    let recs = load::run(&c, &spec(mock.1, 8, 400), epoch, None).expect("load");
    let m = qual_serve::metrics::compute(&recs, Default::default(), Default::default());
    let rate = m.content_events_total as f64 / m.window_seconds.unwrap_or(f64::NAN);
    println!(
        "streamed: {} content events in {:.3} s = {:.0} events/s (target 300000); failed {}",
        m.content_events_total,
        m.window_seconds.unwrap_or(f64::NAN),
        rate,
        m.failed_requests
    );
    let bare = bare_stream_events_per_second(mock.1, 1000, 200);
    println!(
        "baseline bare socket reader (same requests, counts data: lines only): {bare:.0} events/s; kiln-qual / bare = {:.2}",
        rate / bare
    );
}

fn pin_this_thread(cpu: usize) {
    // SAFETY: plain cpu_set_t manipulation for this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// `data:` lines per second read by a bare blocking socket client, one request at a time.
fn bare_stream_events_per_second(port: u16, max_tokens: u64, requests: usize) -> f64 {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        pin_this_thread(0);
        let body = format!(
            r#"{{"model":"kiln-qual-mock","prompt":"bare","max_tokens":{max_tokens},"stream":true}}"#
        );
        let req = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut buf = vec![0u8; 1 << 20];
        let mut events = 0u64;
        let start = Instant::now();
        for _ in 0..requests {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.write_all(req.as_bytes()).expect("send");
            let mut tail = 0u8;
            loop {
                let n = s.read(&mut buf).expect("read");
                if n == 0 {
                    break;
                }
                let mut prev = tail;
                for &b in &buf[..n] {
                    // Count "\nd" of "data:" lines (the first line of a body follows "\n").
                    if prev == b'\n' && b == b'd' {
                        events += 1;
                    }
                    prev = b;
                }
                tail = prev;
            }
        }
        // Minus the non-content lines of each stream (role, finish, [DONE]).
        (events.saturating_sub(3 * requests as u64)) as f64 / start.elapsed().as_secs_f64()
    })
    .join()
    .unwrap()
}

/// Requests per second of 64 bare keep-alive connections (fixed request bytes, framing by
/// `Content-Length`) on one pinned current-thread runtime.
fn bare_unary_requests_per_second(port: u16, seconds: f64) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    std::thread::spawn(move || {
        pin_this_thread(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let stop = Instant::now() + Duration::from_secs_f64(seconds);
            let start = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..64 {
                tasks.push(tokio::spawn(async move {
                    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .expect("connect");
                    s.set_nodelay(true).unwrap();
                    let req = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
                    let mut buf = vec![0u8; 16384];
                    let mut n = 0u64;
                    while Instant::now() < stop {
                        s.write_all(req).await.expect("send");
                        // Read the head, then the body: by Content-Length, or chunked up to
                        // the terminating zero-length chunk.
                        let mut have = 0;
                        let (body_start, len) = loop {
                            let r = s.read(&mut buf[have..]).await.expect("read");
                            assert!(r > 0, "closed");
                            have += r;
                            let text = &buf[..have];
                            if let Some(h) = text.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&text[..h]).to_ascii_lowercase();
                                let len: Option<usize> = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .and_then(|v| v.trim().parse().ok());
                                break (h + 4, len);
                            }
                        };
                        match len {
                            Some(len) => {
                                while have < body_start + len {
                                    have += s.read(&mut buf[have..]).await.expect("read");
                                }
                            }
                            None => {
                                while !buf[body_start..have].ends_with(b"0\r\n\r\n") {
                                    have += s.read(&mut buf[have..]).await.expect("read");
                                }
                            }
                        }
                        n += 1;
                    }
                    n
                }));
            }
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total as f64 / start.elapsed().as_secs_f64()
        })
    })
    .join()
    .unwrap()
}

fn unary_requests_per_second(port: u16, seconds: f64) -> f64 {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let handle = std::thread::spawn(move || {
        pin_this_thread(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let stop = Instant::now() + Duration::from_secs_f64(seconds);
            let mut tasks = Vec::new();
            for _ in 0..64 {
                tasks.push(tokio::spawn(async move {
                    let mut conn = client::connect(addr).await.expect("connect");
                    let mut n = 0u64;
                    while Instant::now() < stop {
                        let (status, _) = client::unary_get(&mut conn, addr, "/v1/models")
                            .await
                            .expect("request");
                        assert_eq!(status, 200);
                        n += 1;
                    }
                    n
                }));
            }
            let start = Instant::now();
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total as f64 / start.elapsed().as_secs_f64()
        })
    });
    handle.join().unwrap()
}

fn wrk_requests_per_second(port: u16) -> Option<f64> {
    let wrk = which("wrk")?;
    // Pinned to the same CPU as our client when taskset exists, so the ratio is per core.
    let mut cmd = match which("taskset") {
        Some(t) => {
            let mut c = Command::new(t);
            c.args(["-c", "0"]).arg(wrk);
            c
        }
        None => Command::new(wrk),
    };
    let out = cmd
        .args([
            "-t1",
            "-c64",
            "-d5s",
            &format!("http://127.0.0.1:{port}/v1/models"),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with("Requests/sec:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn non_streamed() {
    let mock = start_mock(&[]);
    let ours = unary_requests_per_second(mock.1, 5.0);
    println!(
        "non-streamed: {ours:.0} requests/s (GET /v1/models, 64 connections, one pinned thread; target 10000)"
    );
    let bare = bare_unary_requests_per_second(mock.1, 5.0);
    println!(
        "baseline bare tokio loop (same 64 connections, no hyper): {bare:.0} requests/s; kiln-qual / bare = {:.2}",
        ours / bare
    );
    match wrk_requests_per_second(mock.1) {
        Some(w) => println!(
            "wrk -t1 -c64: {w:.0} requests/s; kiln-qual / wrk = {:.2}",
            ours / w
        ),
        None => println!("wrk: not installed (Debian package `wrk`); ratio to wrk skipped"),
    }
}

fn timing_errors(concurrency: usize, requests: usize) {
    let mock = start_mock(&["--ttft-ms", "20", "--itl-ms", "5"]);
    let c = corpus(16);
    let mut s = spec(mock.1, concurrency, requests);
    s.pin_cpu = None;
    let recs = load::run(&c, &s, Instant::now(), None).expect("load");
    let mut ttft_err = Vec::new();
    let mut itl_err = Vec::new();
    for r in recs
        .iter()
        .filter(|r| r.phase == Phase::Measured && r.outcome.is_success())
    {
        let send = r.send_ns.unwrap() as f64;
        ttft_err.push((r.content_event_ns[0] as f64 - send) / 1e6 - 20.0);
        for w in r.content_event_ns.windows(2) {
            itl_err.push((w[1] - w[0]) as f64 / 1e6 - 5.0);
        }
    }
    for (name, v) in [("ttft", &mut ttft_err), ("itl", &mut itl_err)] {
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            println!("timing c={concurrency} {name}: no samples");
            continue;
        }
        let q = |p| percentile_type7(v, p);
        println!(
            "timing c={concurrency} {name} error (measured - injected, ms; n={}): p1 {:+.3} p10 {:+.3} p50 {:+.3} p90 {:+.3} p99 {:+.3} max {:+.3}",
            v.len(),
            q(0.01),
            q(0.10),
            q(0.50),
            q(0.90),
            q(0.99),
            v[v.len() - 1]
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "qual-serve client headroom and timing accuracy (2-core hosts: numbers include contention)"
    );
    streamed_events_per_second();
    non_streamed();
    timing_errors(1, 50);
    timing_errors(64, 320);
}
