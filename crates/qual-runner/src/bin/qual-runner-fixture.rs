//! `qual-runner-fixture <mode> [args]`: a shell-free helper the qual-runner integration tests
//! use as a case command. Modes:
//! - `print TEXT`: print TEXT on stdout;
//! - `exit CODE`: exit with CODE;
//! - `copy FROM TO`: copy a file (used to modify tracked or model files mid-run);
//! - `result STATUS CONFIG_JSON METRIC=VALUE...`: write a case result for `$CASE_ID` to
//!   `$KILN_QUALIFICATION_CASE_RESULT` (metrics in the given order, unit `count`,
//!   aggregation `p50`);
//! - `env NAME`: print the value of NAME or `<unset>`;
//! - `sleep SECS`: sleep.
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
        }
        _ => usage("unknown mode"),
    }
}
