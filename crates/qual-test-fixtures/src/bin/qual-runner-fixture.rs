//! `qual-runner-fixture <mode> [args]`: a shell-free helper the qual-runner integration tests
//! use as a case command (they find it with `qual_test_fixtures::fixture_binary`). Modes:
//! - `print TEXT`: print TEXT on stdout;
//! - `exit CODE`: exit with CODE;
//! - `copy FROM TO`: copy a file (used to modify tracked or model files mid-run);
//! - `remove PATH`: remove a file;
//! - `result STATUS CONFIG_JSON METRIC=VALUE...`: write a case result for `$CASE_ID` to
//!   `$KILN_QUALIFICATION_CASE_RESULT` (metrics in the given order, unit `count`,
//!   aggregation `p50`), then exit with `$RESULT_EXIT_CODE` (default 0: a result can claim
//!   `passed` while the command fails);
//! - `env NAME`: print the value of NAME or `<unset>`;
//! - `sleep SECS`: sleep;
//! - `ignore-term SECS`: ignore SIGTERM, then sleep;
//! - `escape PIDFILE SECS`: double fork a grandchild that calls `setsid`, writes its pid to
//!   PIDFILE and sleeps SECS (escaping the case's process group), while the leader exits 0;
//! - `flood BYTES`: write BYTES bytes to stdout;
//! - `net PORT`: try to connect to 127.0.0.1:PORT (must fail in a loopback-only namespace),
//!   then do a loopback round trip inside; exit 0 only when the first fails and the second
//!   works;
//! - `big-result BYTES`: write BYTES bytes of JSON-looking text to the case-result path;
//! - `raise SIGNAL`: kill itself with SIGNAL;
//! - `fork-children N SECS`: fork N children that each sleep SECS, then exit 0 at once.
//!
//! Exit code 64 is a usage error.

use std::time::Duration;

fn usage(msg: &str) -> ! {
    eprintln!("qual-runner-fixture: failed to parse arguments: {msg}");
    std::process::exit(64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |i: usize| {
        args.get(i)
            .cloned()
            .unwrap_or_else(|| usage("missing argument"))
    };
    match args.first().map(String::as_str) {
        Some("print") => println!("{}", get(1)),
        Some("exit") => std::process::exit(get(1).parse().unwrap_or_else(|_| usage("bad code"))),
        Some("copy") => {
            if let Err(e) = std::fs::copy(get(1), get(2)) {
                eprintln!("qual-runner-fixture: failed to copy: {e}");
                std::process::exit(1);
            }
        }
        Some("remove") => {
            if let Err(e) = std::fs::remove_file(get(1)) {
                eprintln!("qual-runner-fixture: failed to remove: {e}");
                std::process::exit(1);
            }
        }
        Some("env") => {
            let n = get(1);
            println!("{}", std::env::var(&n).unwrap_or_else(|_| "<unset>".into()));
        }
        Some("sleep") => std::thread::sleep(Duration::from_secs_f64(
            get(1).parse().unwrap_or_else(|_| usage("bad seconds")),
        )),
        Some("result") => {
            let status = get(1);
            let config = get(2);
            let case_id = std::env::var("CASE_ID").unwrap_or_else(|_| usage("CASE_ID is not set"));
            let path = std::env::var("KILN_QUALIFICATION_CASE_RESULT")
                .unwrap_or_else(|_| usage("KILN_QUALIFICATION_CASE_RESULT is not set"));
            let metrics: Vec<String> = args[3..]
                .iter()
                .map(|m| {
                    let (n, v) = m.split_once('=').unwrap_or_else(|| usage("metric must be NAME=VALUE"));
                    format!(
                        "{{\"aggregation\":\"p50\",\"lower_is_better\":true,\"name\":\"{n}\",\"unit\":\"count\",\"value\":{v}}}"
                    )
                })
                .collect();
            let doc = format!(
                "{{\"case_id\":\"{case_id}\",\"details\":null,\"duration_seconds\":123.0,\"effective_config\":{config},\"metrics\":[{}],\"schema_version\":1,\"status\":\"{status}\",\"tolerances\":[]}}\n",
                metrics.join(",")
            );
            if let Err(e) = std::fs::write(&path, doc) {
                eprintln!("qual-runner-fixture: failed to write {path}: {e}");
                std::process::exit(1);
            }
            if let Ok(code) = std::env::var("RESULT_EXIT_CODE") {
                std::process::exit(
                    code.parse()
                        .unwrap_or_else(|_| usage("bad RESULT_EXIT_CODE")),
                );
            }
        }
        Some("ignore-term") => {
            // SAFETY: setting a signal disposition.
            unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
            std::thread::sleep(Duration::from_secs_f64(get(1).parse().unwrap_or(30.0)));
        }
        Some("escape") => escape(&get(1), get(2).parse().unwrap_or(30.0)),
        Some("flood") => flood(get(1).parse().unwrap_or_else(|_| usage("bad bytes"))),
        Some("net") => net(get(1).parse().unwrap_or_else(|_| usage("bad port"))),
        Some("big-result") => big_result(get(1).parse().unwrap_or_else(|_| usage("bad bytes"))),
        Some("raise") => {
            let sig: i32 = get(1).parse().unwrap_or_else(|_| usage("bad signal"));
            // SAFETY: signalling ourselves.
            unsafe { libc::raise(sig) };
            std::thread::sleep(Duration::from_secs(5));
        }
        Some("fork-children") => {
            let n: usize = get(1).parse().unwrap_or_else(|_| usage("bad count"));
            let secs: f64 = get(2).parse().unwrap_or(30.0);
            for _ in 0..n {
                // SAFETY: single-threaded fixture; the child only sleeps and _exits.
                unsafe {
                    if libc::fork() == 0 {
                        std::thread::sleep(Duration::from_secs_f64(secs));
                        libc::_exit(0);
                    }
                }
            }
        }
        _ => usage("unknown mode"),
    }
}

fn escape(pidfile: &str, secs: f64) {
    // SAFETY: single-threaded fixture; fork/setsid/_exit are used as in any daemon.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::setsid();
            let pid2 = libc::fork();
            if pid2 == 0 {
                let me = libc::getpid();
                let _ = std::fs::write(pidfile, me.to_string());
                std::thread::sleep(Duration::from_secs_f64(secs));
                libc::_exit(0);
            }
            libc::_exit(0);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    // Give the grandchild time to record itself (bounded generously: a loaded machine can be
    // slow to schedule it, and the tests read the pid file).
    for _ in 0..6000 {
        if std::fs::metadata(pidfile).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn flood(bytes: u64) {
    use std::io::Write;
    let chunk = vec![b'x'; 1 << 16];
    let mut out = std::io::stdout().lock();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if out.write_all(&chunk[..n]).is_err() {
            std::process::exit(1);
        }
        left -= n as u64;
    }
}

fn net(port: u16) {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let outside = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    );
    println!(
        "outside: {}",
        if outside.is_ok() {
            "connected"
        } else {
            "unreachable"
        }
    );
    let inside = (|| -> std::io::Result<()> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        let t = std::thread::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = l.accept()?;
            s.write_all(b"x")
        });
        let mut c = TcpStream::connect(addr)?;
        let mut b = [0u8; 1];
        c.read_exact(&mut b)?;
        t.join().map_err(|_| std::io::Error::other("join"))??;
        Ok(())
    })();
    println!(
        "inside: {}",
        if inside.is_ok() {
            "round-trip"
        } else {
            "failed"
        }
    );
    std::process::exit(if outside.is_err() && inside.is_ok() {
        0
    } else {
        1
    });
}

fn big_result(bytes: u64) {
    use std::io::Write;
    let path = std::env::var("KILN_QUALIFICATION_CASE_RESULT")
        .unwrap_or_else(|_| usage("KILN_QUALIFICATION_CASE_RESULT is not set"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let _ = f.write_all(b"{\"details\":\"");
    let chunk = vec![b'a'; 1 << 16];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if f.write_all(&chunk[..n]).is_err() {
            break;
        }
        left -= n as u64;
    }
    let _ = f.write_all(b"\"}");
}
