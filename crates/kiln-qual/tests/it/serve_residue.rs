//! `serve` and a server that leaves a plain sleeper behind: the mock server starts a child in
//! its own session (not a listener, SIGTERM not ignored) and exits on SIGTERM. The sleeper is
//! alive when the leader has exited, so it is residue — recorded by pid, pid inside the box,
//! session and command line, killed, and a failure — and nothing of it is alive afterwards.

use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

#[test]
fn a_sleeper_left_by_the_server_is_residue_and_fails_the_case() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let marker = format!("kq-serve-residue-{}", std::process::id());
    write_case(dir.path(), port, &marker);
    let out = std::process::Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "serve",
            "--launch",
            "launch.json",
            "--corpus",
            "corpus.jsonl",
            "--seed",
            "1",
            "--result",
            "r.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(result["status"], "failed");
    let details = result["details"].as_str().unwrap();
    assert!(
        details.contains("process(es) behind after its leader ended"),
        "{details}"
    );
    let ev: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.serve-evidence.json")).unwrap())
            .unwrap();
    let shutdown = &ev["lifecycle"]["shutdown"];
    assert_eq!(shutdown["containment_clean"], false, "{shutdown}");
    let residue = shutdown["residue"].as_array().unwrap();
    assert!(
        residue.iter().any(|r| {
            r["cmdline"]
                .as_str()
                .unwrap_or("")
                .contains("while :; do sleep 1; done")
                && r["session"].as_u64() != ev["lifecycle"]["pid"].as_u64()
                && r["box_pid"].as_u64().is_some()
        }),
        "{residue:?}"
    );
    // The box of the server is in the lifecycle record.
    assert!(ev["lifecycle"]["box"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n == "pid"));
    assert!(
        qual_test_fixtures::processes_with_marker(&marker).is_empty(),
        "server processes alive after serve"
    );
}

fn write_case(dir: &Path, port: u16, marker: &str) {
    crate::common::mock_launch_recipe(
        &dir.join("launch.json"),
        "residue-mock",
        BIN,
        port,
        &["--leave-escaped-sleeper"],
        serde_json::json!({"KQ_TEST_MARKER": marker}),
    );
    let corpus: String = (0..4)
        .map(|i| format!("{{\"id\":\"c{i}\",\"endpoint\":\"chat\",\"prompt\":\"hi {i}\",\"max_tokens\":4}}\n"))
        .collect();
    std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
}
